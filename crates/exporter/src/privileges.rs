//! Giving up root once the exporter has started (issue 24).
//!
//! The exporter serves unauthenticated HTTP for as long as the host runs. Root is needed only
//! at start: to enter another network namespace (`--netns`) and to load and attach the eBPF
//! programs. Everything after that works without privilege: the collector thread stays in the
//! namespace it entered, the counter files and the eBPF maps stay open, and a sock_diag dump,
//! the sysctls and `ip route` need none. So a root exporter switches to an unprivileged user
//! after start: supplementary groups cleared, then group and user ids set (real, effective
//! and saved). Leaving uid 0 clears every capability (capabilities(7): no `SECBIT_KEEP_CAPS`
//! is set), which [`drop_to`] checks in `/proc/self/status`. glibc applies the id changes to
//! every thread of the process, the collector's and the trace's included.
//!
//! What is lost: the census names the processes of sockets only where `/proc/PID/fd` is
//! readable, so sockets of other users' processes go unnamed.

use std::ffi::CString;

/// Who the exporter runs as after [`drop_to`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunAs {
    pub user: String,
    pub uid: u32,
    pub gid: u32,
}

/// Errors of the switch; each names the step and the user.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("user '{0}' not found (getpwnam); give an existing one with --user")]
    NoSuchUser(String),
    #[error("user '{user}': {step} failed: {source}")]
    Step {
        user: String,
        step: &'static str,
        source: std::io::Error,
    },
    #[error("after switching to '{user}' the process still holds capabilities (CapEff {cap_eff})")]
    CapabilitiesLeft { user: String, cap_eff: String },
}

/// Looks `user` up (name or numeric uid).
pub fn lookup(user: &str) -> Result<RunAs, Error> {
    let name = CString::new(user).map_err(|_| Error::NoSuchUser(user.into()))?;
    // SAFETY: getpwnam returns a pointer to static storage or null; fields copied at once,
    // before any other passwd call (the exporter makes none on other threads).
    let pw = unsafe { libc::getpwnam(name.as_ptr()) };
    let pw = if pw.is_null() {
        match user.parse::<u32>() {
            // SAFETY: as above.
            Ok(uid) => unsafe { libc::getpwuid(uid) },
            Err(_) => std::ptr::null_mut(),
        }
    } else {
        pw
    };
    if pw.is_null() {
        return Err(Error::NoSuchUser(user.into()));
    }
    // SAFETY: non-null pointer from getpwnam/getpwuid.
    let (uid, gid) = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
    Ok(RunAs {
        user: user.into(),
        uid,
        gid,
    })
}

/// Switches the whole process to `to`; fails (and the caller must stop) if any step fails or
/// a capability is left.
pub fn drop_to(to: &RunAs) -> Result<(), Error> {
    let step = |step: &'static str, rc: libc::c_int| {
        if rc == 0 {
            Ok(())
        } else {
            Err(Error::Step {
                user: to.user.clone(),
                step,
                source: std::io::Error::last_os_error(),
            })
        }
    };
    // SAFETY: plain syscalls on ids; glibc makes them process-wide.
    unsafe {
        step("setgroups", libc::setgroups(0, std::ptr::null()))?;
        step("setresgid", libc::setresgid(to.gid, to.gid, to.gid))?;
        step("setresuid", libc::setresuid(to.uid, to.uid, to.uid))?;
    }
    let cap_eff = effective_capabilities().unwrap_or_default();
    if to.uid != 0 && !cap_eff.trim_start_matches('0').is_empty() {
        return Err(Error::CapabilitiesLeft {
            user: to.user.clone(),
            cap_eff,
        });
    }
    Ok(())
}

/// `CapEff` of `/proc/self/status` (hex).
pub fn effective_capabilities() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .map(|v| v.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_are_found_by_name_or_uid_and_unknown_ones_named_in_the_error() {
        let root = lookup("root").unwrap();
        assert_eq!((root.uid, root.gid), (0, 0));
        assert_eq!(lookup("0").unwrap().uid, 0);
        let e = lookup("no-such-user-tdoc").unwrap_err().to_string();
        assert!(e.contains("'no-such-user-tdoc'"), "{e}");
    }
}
