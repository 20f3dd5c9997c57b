/// The names of the contract (DESIGN.md, dbus/*.xml).
public enum NetActivityNames {
    public static let busName = "org.example.NetActivity"
    public static let objectPath = "/org/example/NetActivity"
    public static let interface = "org.example.NetActivity"
    public static let errorPrefix = "org.example.NetActivity.Error."
    public static let version: UInt32 = 1
}

/// Limits that keep one client from costing the others (README, "Limits").
public enum AgentLimits {
    /// Longest `reason` for BeginActivity, in bytes.
    public static let maxReasonBytes = 1024
    /// Delays are seconds in 0...60.
    public static let maxDelaySeconds = 60.0
}
