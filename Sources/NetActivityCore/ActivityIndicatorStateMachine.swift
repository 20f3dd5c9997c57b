// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
public import NetActivityContract

/// The four states of AFNetworkActivityIndicatorManager (the contract's `State` values).
public typealias IndicatorState = ActivityMember.State

/// AFNetworkActivityIndicatorManager's delayed state machine, as a pure value.
///
/// Events go in (`countChanged`, `timerFired`, `setEnabled`), actions come out; the driver
/// performs them. There is at most one timer at a time (activation or completion); every new
/// timer gets a fresh generation, so a timer that fires after it was replaced is ignored. The
/// machine keeps no count of its own: the driver's ledger is the one total, passed with each event.
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

    public mutating func countChanged(to count: UInt64, now: Instant) -> [Action] {
        let isActivityOccurring = count > 0
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

    /// The live timer fired; `count` is the activity outstanding now.
    public mutating func timerFired(generation: UInt64, count: UInt64, now: Instant) -> [Action] {
        guard generation == timerGeneration else { return [] }  // stale
        timerGeneration = nil
        switch state {
        case .delayingStart:
            return enter(count > 0 ? .active : .notActive, now: now)
        case .delayingEnd:
            return enter(.notActive, now: now)
        case .notActive, .active:
            preconditionFailure("a live timer in state \(state)")
        }
    }

    /// Enables or disables the indicator; `count` is the activity outstanding now.
    public mutating func setEnabled(_ enabled: Bool, count: UInt64, now: Instant) -> [Action] {
        guard enabled != isEnabled else { return [] }
        isEnabled = enabled
        if !enabled { return enter(.notActive, now: now) }
        return count > 0 ? enter(.delayingStart, now: now) : []
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
