// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
internal import CDBus
import Glibc

/// org.freedesktop.DBus.ObjectManager: GetManagedObjects, built over several turns when large,
/// and the InterfacesAdded/Removed bookkeeping of replies under way.
extension ObjectServer {

    func getManagedObjects(_ message: Message, path: String) throws {
        try checkSignature(message, "", "org.freedesktop.DBus.ObjectManager.GetManagedObjects")
        let prefix = path == "/" ? "/" : path + "/"
        let caller = message.sender
        if let caller { audience?.didRead(path, caller: caller, tree: true) }
        if runLater != nil {
            let paths = objects.keys.filter { $0.hasPrefix(prefix) && $0 != path && lists($0, to: caller) }
            if paths.count > Self.managedSlice {
                guard managedReplies.count < Self.managedBuilds,
                    !managedReplies.contains(where: { $0.caller == caller })
                else {
                    managedWaiting.append((message, path))
                    return
                }
                return startManagedReply(message, manager: path, paths: paths)
            }
        }
        try respond(message) { w in
            try w.appendArray(elementSignature: "{oa{sa{sv}}}") { a in
                for (child, object) in objects
                where child.hasPrefix(prefix) && child != path && lists(child, to: caller) {
                    try appendManagedObject(&a, object, path: child)
                }
            }
        }
    }

    func startManagedReply(_ call: Message, manager: String, paths: [String]) {
        let reply = call.makeReturn()
        // Through libdbus's iterators, which can stay open across turns and hand libdbus a body
        // it need not check again: a body marshalled here is checked whole when sent, one step of
        // tens of milliseconds for a reply of megabytes.
        var w = reply.libdbusWriter()
        let array = w.openArray(elementSignature: "{oa{sa{sv}}}")
        let build = ManagedReply(
            call: call, reply: reply, caller: call.sender, manager: manager, array: array, paths: paths)
        managedReplies.append(build)
        continueManagedReply(build)
    }

    /// One slice of `build`; the next on a later turn, or the reply and its corrections.
    func continueManagedReply(_ build: ManagedReply) {
        let end = min(build.paths.count, build.next + Self.managedSlice)
        for path in build.paths[build.next..<end] {
            guard let object = objects[path] else { continue }
            do {
                try appendManagedObject(&build.array.elements, object, path: path)
                build.sent.insert(path)
            } catch {
                continue  // an object whose properties cannot be read is left out
            }
        }
        build.next = end
        if build.next < build.paths.count, let runLater {
            return runLater { [weak self, build] in self?.continueManagedReply(build) }
        }
        MessageWriter.close(&build.array)
        managedReplies.removeAll { $0 === build }
        if !build.call.noReplyExpected { sink.send(build.reply) }
        if let caller = build.caller {
            for (path, interfaces) in build.removed {
                emitInterfacesRemoved(manager: build.manager, path: path, interfaces: interfaces, to: caller)
            }
            for (path, interfaces) in build.changed.sorted(by: { $0.key < $1.key }) {
                guard let object = objects[path] else { continue }
                for name in interfaces.sorted() {
                    guard let table = object.interface(name) else { continue }
                    emitPropertiesChanged(path: path, interface: name, to: caller) { a in
                        for property in table.propertyList { try appendEntry(&a, property, path: path) }
                    }
                }
            }
        }
        // The next waiting call whose caller has no build under way.
        if let i = managedWaiting.firstIndex(where: { w in !managedReplies.contains { $0.caller == w.call.sender } }) {
            let (call, path) = managedWaiting.remove(at: i)
            do { try getManagedObjects(call, path: path) } catch { replyError(call, thrown: error) }
        }
    }

    /// An object already in a reply under way changed or went: noted for its correction.
    func noteManagedChange(path: String, interface: String?, removed: [String]?) {
        for build in managedReplies where build.sent.contains(path) {
            if let removed {
                build.removed.append((path, removed))
                build.changed[path] = nil
            } else if let interface {
                build.changed[path, default: []].insert(interface)
            }
        }
    }

    /// One `{oa{sa{sv}}}` entry of GetManagedObjects: the object's path and every interface's properties.
    func appendManagedObject(_ w: inout MessageWriter, _ object: Object, path: String) throws {
        try w.appendDictEntry { e in
            try e.appendObjectPath(path)
            try appendInterfaces(&e, object, path: path)
        }
    }

    /// `a{sa{sv}}`: each interface of the object with all its properties.
    func appendInterfaces(_ w: inout MessageWriter, _ object: Object, path: String) throws {
        try w.appendArray(elementSignature: "{sa{sv}}") { a in
            for table in object.interfaces {
                try a.appendDictEntry { e in
                    e.append(table.name)
                    try e.appendArray(elementSignature: "{sv}") { p in
                        for property in table.propertyList { try appendEntry(&p, property, path: path) }
                    }
                }
            }
        }
    }
}
