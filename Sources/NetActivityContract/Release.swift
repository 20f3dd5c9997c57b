// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
/// The release of netactivity these binaries are: what `--version` prints. packaging/changelog's
/// newest entry names the same version (a test compares them); the package takes its version
/// from there.
public enum NetActivityRelease {
    public static let version = "1.0.0"
}
