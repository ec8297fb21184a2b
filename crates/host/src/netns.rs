//! Entering a named network namespace (`/run/netns/NAME`, as `ip netns add` makes them): the
//! one place every command and the lab do it.
//!
//! `setns(CLONE_NEWNET)` moves the calling thread only. A thread inside a namespace sees its
//! sockets, its `/proc/sys/net` and `/proc/thread-self/net`; `/proc/net` follows the
//! process's main thread, and sysfs the mount namespace (see the cli's `--netns`).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

/// Where `ip netns` keeps named namespaces.
pub const RUN_NETNS: &str = "/run/netns";

/// The path of namespace `name`, refusing what cannot be a name (empty, a path, `.`, `..`).
pub fn path(name: &str) -> io::Result<PathBuf> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("'{name}' is not a namespace name (see `ip netns list`)"),
        ));
    }
    Ok(PathBuf::from(RUN_NETNS).join(name))
}

/// Opens namespace `name`.
pub fn open(name: &str) -> io::Result<File> {
    let p = path(name)?;
    File::open(&p).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot open {} ({e}; see `ip netns list`)", p.display()),
        )
    })
}

/// Moves the calling thread into the namespace of `file` (from [`open`]). Needs
/// CAP_SYS_ADMIN.
pub fn enter_file(file: &File) -> io::Result<()> {
    // SAFETY: setns on a valid descriptor; it changes only the calling thread.
    if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("setns: {e} (needs root)")));
    }
    Ok(())
}

/// Moves the calling thread into namespace `name`.
pub fn enter(name: &str) -> io::Result<()> {
    enter_file(&open(name)?)
}

/// Runs `f` on a new thread that has entered namespace `name`, and returns its result.
pub fn run_in<T, F>(name: &str, f: F) -> io::Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let file = open(name)?;
    let handle = std::thread::Builder::new()
        .name("tdoc-netns".into())
        .spawn(move || {
            enter_file(&file)?;
            drop(file);
            Ok(f())
        })?;
    handle
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("namespace thread panicked")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_are_namespace_names() {
        for bad in ["", ".", "..", "a/b", "/run/netns/x"] {
            assert_eq!(
                path(bad).unwrap_err().kind(),
                io::ErrorKind::InvalidInput,
                "{bad:?}"
            );
        }
        assert_eq!(path("blue").unwrap(), PathBuf::from("/run/netns/blue"));
    }

    #[test]
    fn a_missing_namespace_is_named_in_the_error() {
        let e = run_in("tdoc-no-such-namespace", || ()).unwrap_err();
        assert!(
            e.to_string().contains("/run/netns/tdoc-no-such-namespace"),
            "{e}"
        );
    }
}
