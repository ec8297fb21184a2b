//! `TCP_INFO` of one connection this process holds (tcp(7)): the kernel's own view of its
//! round trip, window, retransmissions and timer state, read with one getsockopt.

use std::os::fd::{AsFd, AsRawFd};

/// `TCP_INFO` of the connection `sock`, or `None` when the call fails (not a TCP socket,
/// already closed).
pub fn read(sock: impl AsFd) -> Option<libc::tcp_info> {
    // SAFETY: an all-zero tcp_info is valid; the kernel fills at most `len` bytes of it.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: a valid fd, a buffer of `len` bytes and its length, for a documented option.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_fd().as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    (rc == 0).then_some(info)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_connected_socket_has_its_info_and_a_listener_is_listening() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        assert_eq!(super::read(&c).map(|i| i.tcpi_state), Some(1)); // TCP_ESTABLISHED
        assert_eq!(super::read(&l).map(|i| i.tcpi_state), Some(10)); // TCP_LISTEN
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(super::read(&udp).is_none());
    }
}
