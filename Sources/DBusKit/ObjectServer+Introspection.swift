// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
internal import CDBus
import Glibc

/// org.freedesktop.DBus.Introspectable: the XML of each node, with the children its caller may see.
extension ObjectServer {
    // MARK: introspection

    func hasChildren(_ path: String) -> Bool {
        let prefix = path == "/" ? "/" : path + "/"
        return objects.keys.contains { $0.hasPrefix(prefix) }
    }

    func childNodes(_ path: String, caller: String?) -> [String] {
        let prefix = path == "/" ? "/" : path + "/"
        var names = Set<String>()
        for key in objects.keys where key.hasPrefix(prefix) && key != path && lists(key, to: caller) {
            if let first = key.dropFirst(prefix.count).split(separator: "/").first { names.insert(String(first)) }
        }
        return names.sorted()
    }

    public func introspectionXML(path: String) -> String {
        introspectionXML(path: path, object: objects[path])
    }

    /// (`caller`: for a node that is no object, whose children may depend on who asks; an object's
    /// XML is cached and lists every child its audience lists.)
    func introspectionXML(path: String, object: Object?, caller: String? = nil) -> String {
        var x = """
            <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
            <node>

            """
        x += Self.standardInterfacesXML
        if managers.contains(path) { x += Self.objectManagerXML }
        for table in object?.interfaces ?? [] {
            x += "  <interface name=\"\(table.name)\">\n"
            for m in table.methodList {
                x += "    <method name=\"\(m.name)\">\n"
                for a in m.inArgs {
                    x += "      <arg name=\"\(a.name)\" type=\"\(xmlEscape(a.signature))\" direction=\"in\"/>\n"
                }
                for a in m.outArgs {
                    x += "      <arg name=\"\(a.name)\" type=\"\(xmlEscape(a.signature))\" direction=\"out\"/>\n"
                }
                // gdbus-codegen passes the fd list of a method only when told to; without it the
                // generated C code drops every fd (and a lease ends the moment it arrives).
                if (m.inArgs + m.outArgs).contains(where: { $0.signature.contains("h") }) {
                    x += "      <annotation name=\"org.gtk.GDBus.C.UnixFD\" value=\"true\"/>\n"
                }
                x += "    </method>\n"
            }
            for s in table.signals {
                x += "    <signal name=\"\(s.name)\">\n"
                for a in s.args { x += "      <arg name=\"\(a.name)\" type=\"\(xmlEscape(a.signature))\"/>\n" }
                x += "    </signal>\n"
            }
            for p in table.propertyList {
                let open =
                    "    <property name=\"\(p.name)\" type=\"\(xmlEscape(p.signature))\" access=\"\(p.access.rawValue)\""
                if p.emitsChanged == .true {
                    x += open + "/>\n"
                } else {
                    x += open + ">\n"
                    x +=
                        "      <annotation name=\"org.freedesktop.DBus.Property.EmitsChangedSignal\" value=\"\(p.emitsChanged.rawValue)\"/>\n"
                    x += "    </property>\n"
                }
            }
            x += "  </interface>\n"
        }
        for child in childNodes(path, caller: caller) { x += "  <node name=\"\(child)\"/>\n" }
        x += "</node>\n"
        return x
    }

    func xmlEscape(_ s: String) -> String {
        s.replacing("&", with: "&amp;").replacing("<", with: "&lt;").replacing(">", with: "&gt;")
            .replacing("\"", with: "&quot;")
    }

    static let objectManagerXML = """
          <interface name="org.freedesktop.DBus.ObjectManager">
            <method name="GetManagedObjects">
              <arg name="objects" type="a{oa{sa{sv}}}" direction="out"/>
            </method>
            <signal name="InterfacesAdded">
              <arg name="object" type="o"/>
              <arg name="interfaces" type="a{sa{sv}}"/>
            </signal>
            <signal name="InterfacesRemoved">
              <arg name="object" type="o"/>
              <arg name="interfaces" type="as"/>
            </signal>
          </interface>

        """

    static let standardInterfacesXML = """
          <interface name="org.freedesktop.DBus.Peer">
            <method name="Ping"/>
            <method name="GetMachineId">
              <arg name="machine_uuid" type="s" direction="out"/>
            </method>
          </interface>
          <interface name="org.freedesktop.DBus.Introspectable">
            <method name="Introspect">
              <arg name="xml_data" type="s" direction="out"/>
            </method>
          </interface>
          <interface name="org.freedesktop.DBus.Properties">
            <method name="Get">
              <arg name="interface_name" type="s" direction="in"/>
              <arg name="property_name" type="s" direction="in"/>
              <arg name="value" type="v" direction="out"/>
            </method>
            <method name="GetAll">
              <arg name="interface_name" type="s" direction="in"/>
              <arg name="properties" type="a{sv}" direction="out"/>
            </method>
            <method name="Set">
              <arg name="interface_name" type="s" direction="in"/>
              <arg name="property_name" type="s" direction="in"/>
              <arg name="value" type="v" direction="in"/>
            </method>
            <signal name="PropertiesChanged">
              <arg name="interface_name" type="s"/>
              <arg name="changed_properties" type="a{sv}"/>
              <arg name="invalidated_properties" type="as"/>
            </signal>
          </interface>

        """
}
