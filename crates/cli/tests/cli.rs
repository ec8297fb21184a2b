//! Behaviour of the binary itself: help, usage errors, exit codes.

mod support;

#[test]
fn help_lists_every_command() {
    let (code, out, _) = support::run(&["--help"]);
    assert_eq!(code, 0);
    for c in [
        "doctor", "probe", "analyze", "sockets", "counters", "check", "burst", "lab",
    ] {
        assert!(out.contains(c), "--help lacks {c}:\n{out}");
    }
}

#[test]
fn unknown_command_is_a_usage_error() {
    let (code, _, err) = support::run(&["frobnicate"]);
    assert_eq!(code, 2);
    assert!(err.contains("frobnicate"), "{err}");
}
