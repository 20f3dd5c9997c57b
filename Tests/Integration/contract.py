"""The contract's names, generated from dbus/*.xml by scripts/gen-contract.py (make contract).
Do not edit: a test fails when this differs from what the XML makes."""

BUS_NAME = 'org.example.NetActivity'
OBJECT_PATH = '/org/example/NetActivity'
TASK_PATH_PREFIX = '/org/example/NetActivity/tasks/'
ERROR_PREFIX = 'org.example.NetActivity.Error.'
PROPERTIES = 'org.freedesktop.DBus.Properties'
OBJECT_MANAGER = 'org.freedesktop.DBus.ObjectManager'


class Activity:
    """org.example.NetActivity"""
    INTERFACE = 'org.example.NetActivity'
    # name: (in signature, out signature)
    METHODS = {
        'IncrementActivityCount': ('', ''),
        'DecrementActivityCount': ('', ''),
        'BeginActivity': ('s', 'h'),
        'BeginTask': ('sa{sv}', 'o'),
    }
    # name: (type, access)
    PROPERTIES = {
        'Version': ('u', 'read'),
        'Enabled': ('b', 'readwrite'),
        'Visible': ('b', 'read'),
        'State': ('s', 'read'),
        'ActivityCount': ('u', 'read'),
        'ActivationDelay': ('d', 'readwrite'),
        'CompletionDelay': ('d', 'readwrite'),
        'Clients': ('a(ssu)', 'read'),
        'Reasons': ('a{sas}', 'read'),
    }
    # name: signature
    SIGNALS = {
        'Visible': 'b',
    }
    ActivationDelay = 'ActivationDelay'
    ActivityCount = 'ActivityCount'
    BeginActivity = 'BeginActivity'
    BeginTask = 'BeginTask'
    Clients = 'Clients'
    CompletionDelay = 'CompletionDelay'
    DecrementActivityCount = 'DecrementActivityCount'
    Enabled = 'Enabled'
    IncrementActivityCount = 'IncrementActivityCount'
    Reasons = 'Reasons'
    State = 'State'
    Version = 'Version'
    Visible = 'Visible'


class Downloader:
    """org.example.NetActivity.Downloader"""
    INTERFACE = 'org.example.NetActivity.Downloader'
    # name: (in signature, out signature)
    METHODS = {
        'DownloadImage': ('sa{sv}', 'sob'),
        'FetchImage': ('sa{sv}', 'hta{sv}'),
        'CancelDownload': ('s', 'b'),
    }
    # name: (type, access)
    PROPERTIES = {
        'Version': ('u', 'read'),
        'MaximumActiveDownloads': ('u', 'readwrite'),
        'DownloadPrioritization': ('s', 'readwrite'),
        'ActiveDownloads': ('u', 'read'),
        'QueuedDownloads': ('u', 'read'),
        'DiskCapacity': ('t', 'readwrite'),
        'DiskUsage': ('t', 'read'),
        'DiskError': ('s', 'read'),
    }
    # name: signature
    SIGNALS = {
        'DownloadFinished': 'ssbss',
    }
    ActiveDownloads = 'ActiveDownloads'
    CancelDownload = 'CancelDownload'
    DiskCapacity = 'DiskCapacity'
    DiskError = 'DiskError'
    DiskUsage = 'DiskUsage'
    DownloadFinished = 'DownloadFinished'
    DownloadImage = 'DownloadImage'
    DownloadPrioritization = 'DownloadPrioritization'
    FetchImage = 'FetchImage'
    MaximumActiveDownloads = 'MaximumActiveDownloads'
    QueuedDownloads = 'QueuedDownloads'
    Version = 'Version'


class ImageCache:
    """org.example.NetActivity.ImageCache"""
    INTERFACE = 'org.example.NetActivity.ImageCache'
    # name: (in signature, out signature)
    METHODS = {
        'AddImage': ('say', ''),
        'AddImageForRequest': ('ssay', ''),
        'AddImageFromFd': ('sh', ''),
        'AddImageFromFdForRequest': ('ssh', ''),
        'LookupImage': ('s', 'bay'),
        'LookupImageForRequest': ('ss', 'bay'),
        'OpenImage': ('s', 'ht'),
        'OpenImageForRequest': ('ss', 'ht'),
        'RemoveImage': ('s', 'b'),
        'RemoveImageForRequest': ('ss', 'b'),
        'RemoveAllImages': ('', 'b'),
    }
    # name: (type, access)
    PROPERTIES = {
        'Version': ('u', 'read'),
        'MemoryCapacity': ('t', 'readwrite'),
        'PreferredMemoryUsageAfterPurge': ('t', 'readwrite'),
        'MemoryUsage': ('t', 'read'),
        'ImageCount': ('u', 'read'),
        'MemoryUsageByApp': ('a{st}', 'read'),
        'Statistics': ('a{st}', 'read'),
    }
    SIGNALS = {}
    AddImage = 'AddImage'
    AddImageForRequest = 'AddImageForRequest'
    AddImageFromFd = 'AddImageFromFd'
    AddImageFromFdForRequest = 'AddImageFromFdForRequest'
    ImageCount = 'ImageCount'
    LookupImage = 'LookupImage'
    LookupImageForRequest = 'LookupImageForRequest'
    MemoryCapacity = 'MemoryCapacity'
    MemoryUsage = 'MemoryUsage'
    MemoryUsageByApp = 'MemoryUsageByApp'
    OpenImage = 'OpenImage'
    OpenImageForRequest = 'OpenImageForRequest'
    PreferredMemoryUsageAfterPurge = 'PreferredMemoryUsageAfterPurge'
    RemoveAllImages = 'RemoveAllImages'
    RemoveImage = 'RemoveImage'
    RemoveImageForRequest = 'RemoveImageForRequest'
    Statistics = 'Statistics'
    Version = 'Version'


class Task:
    """org.example.NetActivity.Task"""
    INTERFACE = 'org.example.NetActivity.Task'
    # name: (in signature, out signature)
    METHODS = {
        'Suspend': ('', ''),
        'Resume': ('', ''),
        'Complete': ('s', ''),
        'SetProgress': ('tttt', ''),
        'SetFraction': ('d', ''),
    }
    # name: (type, access)
    PROPERTIES = {
        'Version': ('u', 'read'),
        'State': ('s', 'read'),
        'Description': ('s', 'read'),
        'Owner': ('s', 'read'),
        'CountOfBytesSent': ('t', 'read'),
        'CountOfBytesExpectedToSend': ('t', 'read'),
        'CountOfBytesReceived': ('t', 'read'),
        'CountOfBytesExpectedToReceive': ('t', 'read'),
        'FractionCompleted': ('d', 'read'),
        'Error': ('s', 'read'),
    }
    SIGNALS = {}
    Complete = 'Complete'
    CountOfBytesExpectedToReceive = 'CountOfBytesExpectedToReceive'
    CountOfBytesExpectedToSend = 'CountOfBytesExpectedToSend'
    CountOfBytesReceived = 'CountOfBytesReceived'
    CountOfBytesSent = 'CountOfBytesSent'
    Description = 'Description'
    Error = 'Error'
    FractionCompleted = 'FractionCompleted'
    Owner = 'Owner'
    Resume = 'Resume'
    SetFraction = 'SetFraction'
    SetProgress = 'SetProgress'
    State = 'State'
    Suspend = 'Suspend'
    Version = 'Version'
