//! `--netns NAME`: move this process into a named network namespace (as `ip netns exec`
//! does) before anything is measured.
//!
//! Must be called before any thread is started: `setns(2)` moves only the calling thread, and
//! `/proc/net` follows the thread-group leader. Sysfs shows the interfaces of the namespace it
//! was mounted in, so a private mount namespace with a fresh sysfs is set up too (the mount
//! disappears with the process; nothing on the host changes).

use std::ffi::CString;

use anyhow::Context;

/// Enters `/run/netns/NAME` (created by `ip netns add NAME`). Needs root (CAP_SYS_ADMIN).
pub fn enter(name: &str) -> anyhow::Result<()> {
    tcpdoctor_host::netns::enter(name).with_context(|| format!("--netns {name}"))?;
    // SAFETY: plain syscalls with constant C strings.
    unsafe {
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
