//! Which processes hold which sockets, as `ss -p` finds them: every process's open file
//! descriptors under `/proc/<pid>/fd` are symbolic links, and a socket's reads
//! `socket:[<inode>]`, the inode sock_diag reports (`idiag_inode`). Socket inodes are unique
//! on the host (sockfs), so the scan works for sockets of any network namespace.
//!
//! What it cannot see: sockets without a file (TIME_WAIT and NEW_SYN_RECV entries: their
//! owner closed them; the kernel keeps no owner, only a tracer watching the close does);
//! processes this user may not inspect (another user's processes without root or
//! CAP_SYS_PTRACE: counted in [`Attribution::processes_unreadable`]); processes in another
//! PID namespace than this `/proc`'s.
//!
//! Cost: one directory listing per process and one `readlinkat` per open descriptor (plus one
//! read of `/proc/<pid>/comm` per owning process): the same system calls `ss -p` makes.
//! Written against `libc` rather than the procfs crate, whose descriptor iterator opens and
//! stats every descriptor as well (four system calls instead of one), which would make the
//! scan several times slower than `ss` on a host with many descriptors.

use std::collections::{HashMap, HashSet};
use std::ffi::CStr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::Census;

/// A process that holds a socket through one of its file descriptors.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Owner {
    pub pid: u32,
    /// `/proc/<pid>/comm`: the executable's name, at most 15 bytes (`TASK_COMM_LEN`).
    pub comm: String,
    /// The file descriptor number in that process.
    pub fd: u32,
}

/// What the scan covered.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Attribution {
    pub processes_scanned: u64,
    /// Processes whose descriptors this user may not list (another user's, without root):
    /// their sockets show no owner.
    pub processes_unreadable: u64,
    pub descriptors_scanned: u64,
    /// Sockets of the census that have a file (an inode) and were matched to a process.
    pub sockets_attributed: u64,
    /// Sockets with a file that no readable process holds.
    pub sockets_unattributed: u64,
    pub duration_us: u64,
}

/// Fills `owners` of every socket of `census` that has an inode, by scanning `/proc`.
pub fn attribute(census: &mut Census) -> Attribution {
    let t0 = Instant::now();
    let wanted: HashSet<u32> = census
        .sockets
        .iter()
        .map(|s| s.inode)
        .filter(|&i| i != 0)
        .collect();
    let mut stats = Attribution::default();
    let found = scan(&wanted, &mut stats);
    for s in &mut census.sockets {
        if s.inode == 0 {
            continue;
        }
        match found.get(&s.inode) {
            Some(o) => {
                s.owners = o.clone();
                stats.sockets_attributed += 1;
            }
            None => stats.sockets_unattributed += 1,
        }
    }
    stats.duration_us = duration_us(t0.elapsed());
    census.attribution = Some(stats.clone());
    stats
}

fn duration_us(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// inode -> the processes holding it, for the inodes in `wanted`.
fn scan(wanted: &HashSet<u32>, stats: &mut Attribution) -> HashMap<u32, Vec<Owner>> {
    let mut out: HashMap<u32, Vec<Owner>> = HashMap::new();
    if wanted.is_empty() {
        return out;
    }
    let Ok(proc_dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    let mut link = [0u8; 64];
    let mut comms: HashMap<u32, String> = HashMap::new();
    for entry in proc_dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let path = format!("/proc/{pid}/fd\0");
        let Some(dir) = open_dir(&path) else {
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EACCES) | Some(libc::EPERM) => stats.processes_unreadable += 1,
                // ENOENT: the process exited meanwhile.
                _ => {}
            }
            continue;
        };
        stats.processes_scanned += 1;
        for_each_entry(&dir, |fd_name| {
            let Some(fd) = parse_u32(fd_name.to_bytes()) else {
                return;
            };
            stats.descriptors_scanned += 1;
            // SAFETY: readlinkat on a directory fd we own, a NUL-terminated name from
            // getdents, and a buffer whose length we pass.
            let n = unsafe {
                libc::readlinkat(
                    dir.as_raw_fd(),
                    fd_name.as_ptr(),
                    link.as_mut_ptr().cast(),
                    link.len(),
                )
            };
            if n <= 0 {
                return;
            }
            let Some(inode) = socket_inode(&link[..n as usize]) else {
                return;
            };
            if !wanted.contains(&inode) {
                return;
            }
            let comm = comms.entry(pid).or_insert_with(|| comm_of(pid)).clone();
            out.entry(inode).or_default().push(Owner { pid, comm, fd });
        });
    }
    for owners in out.values_mut() {
        owners.sort();
    }
    out
}

/// `socket:[12345]` -> 12345.
fn socket_inode(link: &[u8]) -> Option<u32> {
    let inner = link.strip_prefix(b"socket:[")?.strip_suffix(b"]")?;
    parse_u32(inner)
}

fn parse_u32(b: &[u8]) -> Option<u32> {
    if b.is_empty() || b.len() > 10 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in b {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u64::from(c - b'0');
    }
    u32::try_from(v).ok()
}

fn comm_of(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim_end_matches('\n').to_string())
        .unwrap_or_default()
}

/// Opens a directory (`path` NUL-terminated); `None` with errno set on failure.
fn open_dir(path: &str) -> Option<OwnedFd> {
    // SAFETY: `path` ends in NUL (the callers build it so); open returns a new fd or -1.
    let fd = unsafe {
        libc::open(
            path.as_ptr().cast(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    // SAFETY: fd is a fresh descriptor we own when non-negative.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Calls `f` with the name of every entry of an open directory (getdents64), `.` and `..`
/// excepted.
fn for_each_entry(dir: &OwnedFd, mut f: impl FnMut(&CStr)) {
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        // SAFETY: getdents64 fills at most `buf.len()` bytes of our buffer from our fd.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                dir.as_raw_fd(),
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        if n <= 0 {
            return;
        }
        let n = n as usize;
        let mut off = 0;
        // struct linux_dirent64 { u64 d_ino; i64 d_off; u16 d_reclen; u8 d_type; char d_name[]; }
        while off + 19 <= n {
            let reclen = u16::from_ne_bytes([buf[off + 16], buf[off + 17]]) as usize;
            if reclen < 19 || off + reclen > n {
                return;
            }
            let name = &buf[off + 19..off + reclen];
            if let Ok(c) = CStr::from_bytes_until_nul(name) {
                let b = c.to_bytes();
                if b != b"." && b != b".." {
                    f(c);
                }
            }
            off += reclen;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_links_parse_and_others_do_not() {
        assert_eq!(socket_inode(b"socket:[123456]"), Some(123_456));
        assert_eq!(socket_inode(b"socket:[]"), None);
        assert_eq!(socket_inode(b"pipe:[1]"), None);
        assert_eq!(socket_inode(b"/dev/null"), None);
        assert_eq!(socket_inode(b"socket:[99999999999]"), None);
        assert_eq!(parse_u32(b"42"), Some(42));
        assert_eq!(parse_u32(b"4x"), None);
    }

    #[test]
    fn this_process_owns_its_listener() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let mut c = super::super::census(&super::super::Filter {
            ports: vec![port],
            ..Default::default()
        })
        .unwrap();
        let a = attribute(&mut c);
        assert!(
            a.processes_scanned > 0 && a.descriptors_scanned > 0,
            "{a:?}"
        );
        let s = c
            .sockets
            .iter()
            .find(|s| s.local.port() == port)
            .expect("listener in census");
        assert_eq!(s.owners.len(), 1, "{s:?}");
        assert_eq!(s.owners[0].pid, std::process::id());
        assert_eq!(
            s.owners[0].fd as i32,
            std::os::fd::AsRawFd::as_raw_fd(&l),
            "{s:?}"
        );
        assert_eq!(a.sockets_attributed, 1);
    }
}
