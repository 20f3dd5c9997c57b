import Glibc

func closeFD(_ fd: Int32) -> Int32 { close(fd) }
