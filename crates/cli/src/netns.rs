//! `--netns NAME`: move this process into a named network namespace (as `ip netns exec`
//! does) before anything is measured.
//!
//! Must be called before any thread is started: `setns(2)` moves only the calling thread, and
//! `/proc/net` follows the thread-group leader. Sysfs shows the interfaces of the namespace it
//! was mounted in, so a private mount namespace with a fresh sysfs is set up too (the mount
//! disappears with the process; nothing on the host changes).

use std::ffi::CString;
use std::os::fd::AsRawFd;

use anyhow::{bail, Context};

/// Enters `/run/netns/NAME` (created by `ip netns add NAME`). Needs root (CAP_SYS_ADMIN).
pub fn enter(name: &str) -> anyhow::Result<()> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        bail!("--netns '{name}': not a namespace name (see `ip netns list`)");
    }
    let path = format!("/run/netns/{name}");
    let file = std::fs::File::open(&path)
        .with_context(|| format!("--netns {name}: cannot open {path} (see `ip netns list`)"))?;
    // SAFETY: plain syscalls on a valid fd and constant C strings.
    unsafe {
        if libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) != 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("--netns {name}: setns (needs root)"));
        }
        // Fresh sysfs for /sys/class/net of the new namespace, in a private mount namespace.
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("--netns {name}: unshare mount namespace"));
        }
        let root = CString::new("/").expect("constant");
        let sys = CString::new("/sys").expect("constant");
        let fstype = CString::new("sysfs").expect("constant");
        let source = CString::new(name).context("--netns: name contains NUL")?;
        if libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_SLAVE | libc::MS_REC,
            std::ptr::null(),
        ) != 0
        {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("--netns {name}: make / a slave mount"));
        }
        libc::umount2(sys.as_ptr(), libc::MNT_DETACH);
        if libc::mount(
            source.as_ptr(),
            sys.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        ) != 0
        {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("--netns {name}: mount sysfs"));
        }
    }
    Ok(())
}
