//! [`Record`]: the raw timestamps of one connection (or one request on a reused connection),
//! as the workers write them. No statistics here.
//!
//! Times are nanoseconds since the run started (one monotonic clock for all workers).

use serde::{Deserialize, Serialize};

/// One connection, or one request on a persistent connection (`reused`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Record {
    pub worker: u16,
    /// Local port of the connection (0 when no socket was bound).
    pub local_port: u16,
    /// HTTP status code, 0 when none.
    pub status: u16,
    /// The request ran on a connection opened by an earlier request.
    pub reused: bool,
    /// Reply bytes received (saturating), also when the request failed or was cut: a reply
    /// that dribbles shows here.
    pub received_bytes: u32,
    pub outcome: Outcome,
    /// When the request was due: the open-loop schedule, else equal to `start_ns`.
    pub scheduled_ns: u64,
    pub start_ns: u64,
    /// connect() returned (None when it failed or the connection was reused).
    pub connected_ns: Option<u64>,
    /// The TLS handshake finished (https only; None when it failed or was not needed).
    pub tls_done_ns: Option<u64>,
    /// First byte of the reply arrived.
    pub first_byte_ns: Option<u64>,
    /// The request finished (reply complete, error, or close done).
    pub end_ns: u64,
    /// The connection's round trip as the kernel measured it (`tcpi_min_rtt` of TCP_INFO:
    /// from the handshake and the ACKs, in softirq, free of this process's scheduling), read
    /// when the handshake or the first-byte wait took [`DETAIL_AFTER`] or more; 0 when not
    /// read.
    pub kernel_rtt_us: u32,
    /// The handshake's round trip as the kernel measured it (`tcpi_rtt` read as connect()
    /// returns, when the connect took [`DETAIL_AFTER`] or more: the SYN-ACK's RTT sample, its
    /// only one then); 0 when not read. The rest of a longer connect() was the client waking
    /// up.
    pub handshake_rtt_us: u32,
    /// How long this request's worker waited for a CPU since its previous reading (schedstat
    /// `run_delay`, read at the worker's start and at the end of each request that took
    /// [`DETAIL_AFTER`] or more): at least every wait for a CPU during this request, so a
    /// bound on what the worker's own scheduling added to its timings. `None` when not read.
    pub cpu_wait_us: Option<u32>,
}

/// Requests that took this long read kernel figures that explain their time (a system call
/// or two each): their connection's round trip ([`Record::kernel_rtt_us`]) and their
/// worker's CPU wait ([`Record::cpu_wait_us`]). Fast loopback requests (~50 us) do not pay
/// for them; with a millisecond round trip the calls are noise.
pub const DETAIL_AFTER: u64 = 1_000_000;

impl Record {
    /// A request of `worker` due at `scheduled_ns` that starts at `start_ns`: nothing read
    /// yet, its outcome `Ok` until it fails.
    pub fn started(worker: u16, scheduled_ns: u64, start_ns: u64) -> Record {
        Record {
            worker,
            local_port: 0,
            status: 0,
            reused: false,
            received_bytes: 0,
            outcome: Outcome::Ok,
            scheduled_ns,
            start_ns,
            connected_ns: None,
            tls_done_ns: None,
            first_byte_ns: None,
            end_ns: 0,
            kernel_rtt_us: 0,
            handshake_rtt_us: 0,
            cpu_wait_us: None,
        }
    }

    /// Handshake time (connect() call to return).
    pub fn connect_ns(&self) -> Option<u64> {
        self.connected_ns.map(|c| c.saturating_sub(self.start_ns))
    }

    /// TLS handshake time (connect() returned to the handshake's end).
    pub fn tls_ns(&self) -> Option<u64> {
        let from = self.connected_ns?;
        self.tls_done_ns.map(|t| t.saturating_sub(from))
    }

    /// From the request being sent (connection ready) to the first byte of the reply.
    pub fn first_byte_wait_ns(&self) -> Option<u64> {
        let from = self
            .tls_done_ns
            .or(self.connected_ns)
            .unwrap_or(self.start_ns);
        self.first_byte_ns.map(|f| f.saturating_sub(from))
    }

    /// From the first byte of the reply to the end of the request (the reply's transfer,
    /// and closing).
    pub fn transfer_ns(&self) -> Option<u64> {
        self.first_byte_ns.map(|f| self.end_ns.saturating_sub(f))
    }

    /// Whole request as the user experiences it: from the scheduled start to the end.
    pub fn total_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.scheduled_ns)
    }

    pub fn is_ok(&self) -> bool {
        self.outcome == Outcome::Ok
    }

    /// How long the request waited in the phase where it stopped: the handshake (connect
    /// call to the end) when it never connected, else from the request being sent (the
    /// connection ready) to the end.
    pub fn stopped_phase_wait_ns(&self) -> u64 {
        let from = self.connected_ns.unwrap_or(self.start_ns);
        self.end_ns.saturating_sub(from)
    }
}

/// How a connection/request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case", tag = "result")]
pub enum Outcome {
    Ok,
    Error {
        kind: ErrorKind,
        phase: Phase,
    },
    /// Still in flight when the run ended or was interrupted; not counted as a failure.
    Cut {
        phase: Phase,
    },
}

/// Where in the exchange an error happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Socket,
    Bind,
    Connect,
    /// The TLS handshake after connect() (https).
    Tls,
    Send,
    Reply,
}

/// Failure kinds, by errno where there is one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// EADDRNOTAVAIL: no free local port (or address) for this destination.
    AddrNotAvail,
    /// EADDRINUSE: an explicitly bound local port is taken (often by TIME_WAIT).
    AddrInUse,
    /// ECONNREFUSED: RST answered the SYN (no listener).
    Refused,
    /// ECONNRESET / EPIPE: the peer reset an established connection.
    Reset,
    /// ETIMEDOUT: the kernel gave up after tcp_syn_retries (or data retries).
    TimedOut,
    /// Our connect timeout cut the handshake.
    ConnectTimeout,
    /// Our reply timeout cut the wait for the reply.
    ReplyTimeout,
    /// EHOSTUNREACH / ENETUNREACH.
    Unreachable,
    /// The peer closed before the whole reply arrived.
    ShortReply,
    /// The reply was not valid HTTP.
    BadReply,
    /// An HTTP answer outside the expected statuses (`--expect-status`, default 2xx).
    HttpStatus { status: u16 },
    /// EMFILE / ENFILE: out of file descriptors.
    NoFiles,
    /// The server's certificate is not trusted (unknown issuer, wrong name, expired).
    Certificate,
    /// The TLS handshake failed otherwise (an alert, a protocol error).
    Tls,
    /// Any other errno.
    Other { errno: i32 },
}

impl ErrorKind {
    pub fn from_io(e: &std::io::Error) -> ErrorKind {
        if crate::tls::is_certificate_error(e) {
            return ErrorKind::Certificate;
        }
        if crate::tls::is_tls_error(e) {
            return ErrorKind::Tls;
        }
        match e.raw_os_error() {
            Some(libc::EADDRNOTAVAIL) => ErrorKind::AddrNotAvail,
            Some(libc::EADDRINUSE) => ErrorKind::AddrInUse,
            Some(libc::ECONNREFUSED) => ErrorKind::Refused,
            Some(libc::ECONNRESET) | Some(libc::EPIPE) | Some(libc::ECONNABORTED) => {
                ErrorKind::Reset
            }
            Some(libc::ETIMEDOUT) => ErrorKind::TimedOut,
            Some(libc::EHOSTUNREACH) | Some(libc::ENETUNREACH) => ErrorKind::Unreachable,
            Some(libc::EMFILE) | Some(libc::ENFILE) => ErrorKind::NoFiles,
            Some(errno) => ErrorKind::Other { errno },
            None => ErrorKind::Other { errno: 0 },
        }
    }

    /// snake_case name, as in JSON (`addr_not_avail`, `refused`, ..., `other`).
    pub fn name(&self) -> &'static str {
        match self {
            ErrorKind::AddrNotAvail => "addr_not_avail",
            ErrorKind::AddrInUse => "addr_in_use",
            ErrorKind::Refused => "refused",
            ErrorKind::Reset => "reset",
            ErrorKind::TimedOut => "timed_out",
            ErrorKind::ConnectTimeout => "connect_timeout",
            ErrorKind::ReplyTimeout => "reply_timeout",
            ErrorKind::Unreachable => "unreachable",
            ErrorKind::ShortReply => "short_reply",
            ErrorKind::BadReply => "bad_reply",
            ErrorKind::HttpStatus { .. } => "http_status",
            ErrorKind::NoFiles => "no_files",
            ErrorKind::Certificate => "certificate",
            ErrorKind::Tls => "tls",
            ErrorKind::Other { .. } => "other",
        }
    }

    /// The kind named `name` ([`ErrorKind::name`]); an HTTP status or errno the name leaves
    /// out is 0.
    pub fn from_name(name: &str) -> Option<ErrorKind> {
        const PLAIN: [ErrorKind; 13] = [
            ErrorKind::AddrNotAvail,
            ErrorKind::AddrInUse,
            ErrorKind::Refused,
            ErrorKind::Reset,
            ErrorKind::TimedOut,
            ErrorKind::ConnectTimeout,
            ErrorKind::ReplyTimeout,
            ErrorKind::Unreachable,
            ErrorKind::ShortReply,
            ErrorKind::BadReply,
            ErrorKind::HttpStatus { status: 0 },
            ErrorKind::NoFiles,
            ErrorKind::Certificate,
        ];
        PLAIN
            .into_iter()
            .chain([ErrorKind::Tls, ErrorKind::Other { errno: 0 }])
            .find(|k| k.name() == name)
    }

    /// The errno name as C spells it, or a short description when there is no errno.
    pub fn errno_name(&self) -> String {
        match self {
            ErrorKind::AddrNotAvail => "EADDRNOTAVAIL".into(),
            ErrorKind::AddrInUse => "EADDRINUSE".into(),
            ErrorKind::Refused => "ECONNREFUSED".into(),
            ErrorKind::Reset => "ECONNRESET".into(),
            ErrorKind::TimedOut => "ETIMEDOUT".into(),
            ErrorKind::ConnectTimeout => "connect timeout".into(),
            ErrorKind::ReplyTimeout => "reply timeout".into(),
            ErrorKind::Unreachable => "EHOSTUNREACH".into(),
            ErrorKind::ShortReply => "short reply (peer closed)".into(),
            ErrorKind::BadReply => "malformed reply".into(),
            ErrorKind::HttpStatus { status } => format!("HTTP {status}"),
            ErrorKind::NoFiles => "EMFILE".into(),
            ErrorKind::Certificate => "certificate not trusted".into(),
            ErrorKind::Tls => "TLS handshake failed".into(),
            ErrorKind::Other { errno } => format!("errno {errno}"),
        }
    }

    /// Errors caused by this host running out of local resources (ports, files): retrying at
    /// once fails again, so workers back off briefly.
    pub fn is_local_exhaustion(&self) -> bool {
        matches!(
            self,
            ErrorKind::AddrNotAvail | ErrorKind::AddrInUse | ErrorKind::NoFiles
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_found_by_its_name() {
        for errno in [
            libc::EADDRNOTAVAIL,
            libc::ECONNRESET,
            libc::EMFILE,
            libc::EPERM,
        ] {
            let k = ErrorKind::from_io(&std::io::Error::from_raw_os_error(errno));
            assert_eq!(
                ErrorKind::from_name(k.name()).map(|k| k.name()),
                Some(k.name())
            );
        }
        assert_eq!(ErrorKind::from_name("tls"), Some(ErrorKind::Tls));
        assert_eq!(ErrorKind::from_name("bogus"), None);
    }

    #[test]
    fn errno_mapping() {
        let e = std::io::Error::from_raw_os_error(libc::EADDRNOTAVAIL);
        assert_eq!(ErrorKind::from_io(&e), ErrorKind::AddrNotAvail);
        assert_eq!(ErrorKind::AddrNotAvail.errno_name(), "EADDRNOTAVAIL");
        // name() agrees with serde for unit variants.
        for k in [
            ErrorKind::AddrNotAvail,
            ErrorKind::ReplyTimeout,
            ErrorKind::NoFiles,
        ] {
            assert_eq!(serde_json::to_value(k).unwrap(), k.name());
        }
        let e = std::io::Error::from_raw_os_error(libc::ECONNREFUSED);
        assert_eq!(ErrorKind::from_io(&e), ErrorKind::Refused);
        let e = std::io::Error::from_raw_os_error(libc::EPERM);
        assert_eq!(
            ErrorKind::from_io(&e),
            ErrorKind::Other { errno: libc::EPERM }
        );
    }

    #[test]
    fn phases_of_a_record() {
        let r = Record {
            worker: 0,
            local_port: 40000,
            status: 0,
            reused: false,
            received_bytes: 0,
            outcome: Outcome::Ok,
            scheduled_ns: 0,
            start_ns: 500,
            connected_ns: Some(1_500),
            tls_done_ns: None,
            first_byte_ns: Some(4_500),
            end_ns: 5_000,
            kernel_rtt_us: 0,
            handshake_rtt_us: 0,
            cpu_wait_us: None,
        };
        assert_eq!(r.connect_ns(), Some(1_000));
        assert_eq!(r.first_byte_wait_ns(), Some(3_000));
        assert_eq!(r.total_ns(), 5_000);
    }
}
