//! Socket helpers of the `sockets` and `counters` tests: enter a test namespace on one
//! thread, listen with an explicit backlog and receive buffer, connect without blocking.

#![allow(dead_code)]

use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::support::Netns;

/// Runs `f` on a thread inside `ns` (setns on that thread only); sockets it creates belong
/// to the namespace and may be returned to the caller.
pub fn in_ns<T: Send + 'static>(ns: &Netns, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/run/netns/{}", ns.name);
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).expect("open netns");
        let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
        f()
    })
    .join()
    .expect("thread in netns")
}

/// A listening socket with an explicit backlog and optional receive buffer (set before
/// listen() so accepted sockets inherit it).
pub fn listener(addr: SocketAddr, backlog: i32, rcvbuf: Option<i32>) -> TcpListener {
    let family = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    unsafe {
        let fd = libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0);
        let owned = OwnedFd::from_raw_fd(fd);
        let one: libc::c_int = 1;
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            &one as *const _ as *const libc::c_void,
            4,
        );
        if let Some(b) = rcvbuf {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                &b as *const _ as *const libc::c_void,
                4,
            );
        }
        let (sa, len) = sockaddr(addr);
        assert_eq!(
            libc::bind(fd, &sa as *const _ as *const libc::sockaddr, len),
            0,
            "bind {addr}: {}",
            std::io::Error::last_os_error()
        );
        assert_eq!(libc::listen(fd, backlog), 0);
        TcpListener::from(owned)
    }
}

fn sockaddr(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*a.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in, sin) };
            (
                ss,
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: 0,
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: 0,
            };
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in6, sin6) };
            (
                ss,
                std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
            )
        }
    }
}

/// A non-blocking connect left in progress (the handshake may or may not complete).
pub fn connect_nonblocking(addr: SocketAddr) -> OwnedFd {
    unsafe {
        let fd = libc::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        );
        assert!(fd >= 0);
        let (sa, len) = sockaddr(addr);
        let rc = libc::connect(fd, &sa as *const _ as *const libc::sockaddr, len);
        let err = std::io::Error::last_os_error();
        assert!(
            rc == 0 || err.raw_os_error() == Some(libc::EINPROGRESS),
            "connect {addr}: {err}"
        );
        OwnedFd::from_raw_fd(fd)
    }
}
