/// The four states of AFNetworkActivityIndicatorManager, with the names the D-Bus `State`
/// property uses.
public enum IndicatorState: String, Sendable, CaseIterable {
    case notActive = "not-active"
    case delayingStart = "delaying-start"
    case active = "active"
    case delayingEnd = "delaying-end"
}

/// AFNetworkActivityIndicatorManager's delayed state machine, as a pure value.
///
/// Events go in (`countChanged`, `timerFired`, `setEnabled`), actions come out; the driver
/// performs them. There is at most one timer at a time (activation or completion); every new
/// timer gets a fresh generation, so a timer that fires after it was replaced is ignored.
///
/// Transitions (exactly AFNetworking's):
/// - NotActive + count > 0 -> DelayingStart (activation timer)
/// - DelayingStart ignores count changes; its timer moves to Active if count > 0, else NotActive
/// - Active + count == 0 -> DelayingEnd (completion timer)
/// - DelayingEnd + count > 0 -> Active (timer cancelled); its timer moves to NotActive
/// - entering NotActive cancels any timer; disabling forces NotActive.
///
/// Where AFNetworking is silent: enabling again with activity outstanding starts the activation
/// delay at once (AFNetworking waits for the next count change, which would leave a running
/// download unshown).
public struct ActivityIndicatorStateMachine: Sendable {
    public enum Action: Equatable, Sendable {
        case scheduleTimer(deadline: Instant, generation: UInt64)
        case cancelTimer
        case publishState(IndicatorState)
        case publishVisible(Bool)
    }

    public private(set) var state: IndicatorState = .notActive
    public private(set) var isEnabled = true
    public private(set) var activityCount: UInt64 = 0
    public var activationDelay: Duration
    public var completionDelay: Duration
    /// The generation of the live timer, if any.
    public private(set) var timerGeneration: UInt64?
    private var lastGeneration: UInt64 = 0

    public init(activationDelay: Duration = .seconds(1), completionDelay: Duration = .milliseconds(170)) {
        self.activationDelay = activationDelay
        self.completionDelay = completionDelay
    }

    /// The indicator shows in Active and while the completion delay runs.
    public var isVisible: Bool { state == .active || state == .delayingEnd }

    private var isActivityOccurring: Bool { activityCount > 0 }

    public mutating func countChanged(to count: UInt64, now: Instant) -> [Action] {
        activityCount = count
        guard isEnabled else { return [] }
        switch state {
        case .notActive:
            return isActivityOccurring ? enter(.delayingStart, now: now) : []
        case .delayingStart:
            return []  // let the activation delay finish
        case .active:
            return isActivityOccurring ? [] : enter(.delayingEnd, now: now)
        case .delayingEnd:
            return isActivityOccurring ? enter(.active, now: now) : []
        }
    }

    public mutating func timerFired(generation: UInt64, now: Instant) -> [Action] {
        guard generation == timerGeneration else { return [] }  // stale
        timerGeneration = nil
        switch state {
        case .delayingStart:
            return enter(isActivityOccurring ? .active : .notActive, now: now)
        case .delayingEnd:
            return enter(.notActive, now: now)
        case .notActive, .active:
            preconditionFailure("a live timer in state \(state)")
        }
    }

    public mutating func setEnabled(_ enabled: Bool, now: Instant) -> [Action] {
        guard enabled != isEnabled else { return [] }
        isEnabled = enabled
        if !enabled { return enter(.notActive, now: now) }
        return isActivityOccurring ? enter(.delayingStart, now: now) : []
    }

    private mutating func enter(_ new: IndicatorState, now: Instant) -> [Action] {
        guard new != state else { return [] }
        let wasVisible = isVisible
        state = new
        var actions: [Action] = []
        switch new {
        case .notActive, .active:
            if timerGeneration != nil {
                timerGeneration = nil
                actions.append(.cancelTimer)
            }
        case .delayingStart:
            actions.append(schedule(now + activationDelay))
        case .delayingEnd:
            actions.append(schedule(now + completionDelay))
        }
        actions.append(.publishState(new))
        if isVisible != wasVisible { actions.append(.publishVisible(isVisible)) }
        return actions
    }

    private mutating func schedule(_ deadline: Instant) -> Action {
        lastGeneration += 1
        timerGeneration = lastGeneration
        return .scheduleTimer(deadline: deadline, generation: lastGeneration)
    }
}
