// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/// Values under keys that the table hands out, found by indexing an array rather than by hashing:
/// a key is a serial number (never repeated) above the index of its slot, so a key whose value was
/// removed never finds the value that later took its slot. The event loop keeps its fd
/// registrations and timers here: every event and every turn looks one up.
struct SlotTable<Value> {
    /// The key's low bits are the slot; the high bits the serial number.
    static var slotBits: UInt64 { 24 }

    private var keys: [UInt64] = []
    private var values: [Value?] = []
    private var free: [Int] = []
    private var nextSerial: UInt64 = 1
    private(set) var count = 0

    /// Stores `value` under a new key; keys increase, so they also order values by insertion.
    mutating func insert(_ value: Value) -> UInt64 {
        let slot: Int
        if let reused = free.popLast() {
            slot = reused
        } else {
            precondition(UInt64(values.count) < 1 << Self.slotBits, "too many live entries")
            slot = values.count
            keys.append(0)
            values.append(nil)
        }
        let key = nextSerial << Self.slotBits | UInt64(slot)
        nextSerial += 1
        keys[slot] = key
        values[slot] = value
        count += 1
        return key
    }

    private func slot(of key: UInt64) -> Int? {
        let slot = Int(truncatingIfNeeded: key & (1 << Self.slotBits - 1))
        return slot < keys.count && keys[slot] == key ? slot : nil
    }

    subscript(key: UInt64) -> Value? {
        guard let slot = slot(of: key) else { return nil }
        return values[slot]
    }

    /// Changes the value under a live key (nothing when the key is gone).
    mutating func update(_ key: UInt64, _ change: (inout Value) -> Void) {
        guard let slot = slot(of: key), values[slot] != nil else { return }
        change(&values[slot]!)
    }

    func contains(_ key: UInt64) -> Bool { slot(of: key) != nil }

    @discardableResult
    mutating func remove(_ key: UInt64) -> Value? {
        guard let slot = slot(of: key) else { return nil }
        let value = values[slot]
        keys[slot] = 0
        values[slot] = nil
        free.append(slot)
        count -= 1
        return value
    }
}
