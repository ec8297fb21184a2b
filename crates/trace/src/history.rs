//! The last owners of TIME_WAIT sockets, read from the trace's `history` table.
//!
//! A TIME_WAIT socket has no file and no owner: the process that made the connection closed
//! it. Only a tracer that watched the close knows who it was. The BPF program
//! (bpf/trace.bpf.c) writes one entry per closing active-open connection into `history`, a
//! direct-mapped array of slots indexed by a hash of (netns, 4-tuple) (`tuple_slot()`): the
//! 4-tuple, how it ended (`H_ACTIVE`: this end closed first and holds TIME_WAIT), the tgid
//! and comm of the process that called connect(). This module computes the same slot in
//! user space for each TIME_WAIT socket of a census, reads that one slot (a map lookup),
//! and keeps the entry only when its sequence word is even and unchanged across two reads
//! and its 4-tuple is the socket's: the same rules the BPF reader (`hist_get`) follows.
//!
//! What it cannot name: sockets that entered TIME_WAIT before the trace started; sockets
//! whose slot a later close of another 4-tuple took (the table keeps the newest of the
//! 4-tuples that hash to one slot); connections this host accepted (the trace records
//! owners only at connect()).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use tcpdoctor_host::sockets::{time_wait_for, Census, LastOwner, LastOwners, TcpState};

use crate::loader::Probe;
use crate::Error;

/// Slots in the table (`HIST_SLOTS` in the C source).
pub const HIST_SLOTS: u32 = 1 << 17;
/// Size of `struct tuple` (a `_Static_assert` in the C source pins it).
pub const TUPLE_BYTES: usize = 44;
/// Size of `struct hist_slot` (pinned likewise).
pub const SLOT_BYTES: usize = 88;

/// `enum how` in the C source: this end closed first and holds TIME_WAIT.
const H_ACTIVE: u32 = 3;

const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;

/// `struct tuple` as the BPF program fills it (`tuple_of()`): netns inode, local and remote
/// port in host order, the address family, 3 zero bytes, then the local and remote address
/// (IPv4 in the first 4 bytes, the rest zero). Little-endian, as the kernel stores it on the
/// machines tcpdoctor supports.
pub fn tuple_bytes(netns: u32, local: SocketAddr, remote: SocketAddr) -> [u8; TUPLE_BYTES] {
    let mut t = [0u8; TUPLE_BYTES];
    t[0..4].copy_from_slice(&netns.to_le_bytes());
    t[4..6].copy_from_slice(&local.port().to_le_bytes());
    t[6..8].copy_from_slice(&remote.port().to_le_bytes());
    let put = |t: &mut [u8], ip: IpAddr| match ip {
        IpAddr::V4(a) => t[..4].copy_from_slice(&a.octets()),
        IpAddr::V6(a) => t.copy_from_slice(&a.octets()),
    };
    t[8] = if local.is_ipv4() { AF_INET } else { AF_INET6 };
    put(&mut t[12..28], local.ip());
    put(&mut t[28..44], remote.ip());
    t
}

/// The slot of a 4-tuple: `tuple_slot()` of the C source, word by word (native-endian 32-bit
/// words: xor, multiply by 0x85ebca6b, xor-shift 15, from a seed of 0x9e3779b9).
pub fn tuple_slot(t: &[u8; TUPLE_BYTES]) -> u32 {
    let mut h: u32 = 0x9e37_79b9;
    for w in t.chunks_exact(4) {
        h ^= u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        h = h.wrapping_mul(0x85eb_ca6b);
        h ^= h >> 15;
    }
    h & (HIST_SLOTS - 1)
}

/// A history entry, decoded from `struct hist_slot`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub seq: u64,
    pub tuple: [u8; TUPLE_BYTES],
    /// CLOCK_MONOTONIC of the close, nanoseconds.
    pub close_ns: u64,
    pub how: u32,
    pub tgid: u32,
    pub comm: String,
}

impl Entry {
    /// Layout: seq u64 at 0, tuple at 8..52, 4 bytes of padding, close_ns at 56, how at 64,
    /// tgid at 68, comm at 72..88.
    pub fn decode(b: &[u8; SLOT_BYTES]) -> Entry {
        let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let u64_at = |o: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[o..o + 8]);
            u64::from_le_bytes(a)
        };
        let mut tuple = [0u8; TUPLE_BYTES];
        tuple.copy_from_slice(&b[8..8 + TUPLE_BYTES]);
        let comm = &b[72..88];
        let end = comm.iter().position(|&c| c == 0).unwrap_or(comm.len());
        Entry {
            seq: u64_at(0),
            tuple,
            close_ns: u64_at(56),
            how: u32_at(64),
            tgid: u32_at(68),
            comm: String::from_utf8_lossy(&comm[..end]).into_owned(),
        }
    }
}

/// The entry for this 4-tuple, when the slot holds it: read twice, kept only when both reads
/// agree and the sequence word is even (no writer was inside the slot), so a torn entry is
/// never used.
pub(crate) fn entry_of(probe: &Probe, tuple: &[u8; TUPLE_BYTES]) -> Result<Option<Entry>, Error> {
    let slot = tuple_slot(tuple);
    let first = probe.history_slot(slot)?;
    if first[8..8 + TUPLE_BYTES] != tuple[..] || first[0] & 1 == 1 {
        return Ok(None);
    }
    let second = probe.history_slot(slot)?;
    if second != first {
        return Ok(None);
    }
    Ok(Some(Entry::decode(&first)))
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn tick_ns() -> u64 {
    // SAFETY: sysconf has no memory effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    1_000_000_000 / hz
}

/// When the process now running as `pid` started, on CLOCK_MONOTONIC (the trace's clock);
/// `None` when there is none. `/proc/<pid>/stat` field 22 counts clock ticks since boot,
/// CLOCK_BOOTTIME, which runs ahead of CLOCK_MONOTONIC by the time spent suspended.
fn started_mono_ns(pid: u32, boot_minus_mono_ns: u64) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the comm, which is in parentheses and may hold spaces: state is field 3,
    // starttime field 22.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    if matches!(fields.next()?, "Z" | "X") {
        // Exited, not yet reaped by its parent.
        return None;
    }
    let ticks: u64 = fields.nth(18)?.parse().ok()?;
    Some(
        ticks
            .saturating_mul(tick_ns())
            .saturating_sub(boot_minus_mono_ns),
    )
}

/// Names the last owner of each TIME_WAIT socket of `census` (taken in network namespace
/// `netns`, by inode) whose close the trace recorded, and sets `census.last_owners`.
/// `traced_for_ms`: from the trace's attachment to the end of the census.
pub(crate) fn attribute(
    probe: &Probe,
    netns: u32,
    traced_for_ms: u64,
    census: &mut Census,
) -> Result<(), Error> {
    let t0 = Instant::now();
    let boot_minus_mono =
        clock_ns(libc::CLOCK_BOOTTIME).saturating_sub(clock_ns(libc::CLOCK_MONOTONIC));
    // Per pid: when the process running under it now started (None: no such process).
    let mut started: HashMap<u32, Option<u64>> = HashMap::new();
    let (mut looked_up, mut found, mut before_trace) = (0u64, 0u64, 0u64);
    for s in census
        .sockets
        .iter_mut()
        .filter(|s| s.state == TcpState::TimeWait)
    {
        looked_up += 1;
        let entry = entry_of(probe, &tuple_bytes(netns, s.local, s.remote))?;
        match entry.filter(|e| e.how == H_ACTIVE) {
            Some(e) => {
                found += 1;
                let start = *started
                    .entry(e.tgid)
                    .or_insert_with(|| started_mono_ns(e.tgid, boot_minus_mono));
                // Gone, or the pid now names a process started after this close (one tick of
                // slack: the start time is rounded down to a clock tick).
                let gone = start.is_none_or(|st| st > e.close_ns.saturating_add(tick_ns()));
                s.last_owner = Some(LastOwner {
                    pid: e.tgid,
                    comm: e.comm,
                    exited: gone,
                });
            }
            None => {
                if time_wait_for(s).is_some_and(|t| t.as_millis() as u64 > traced_for_ms) {
                    before_trace += 1;
                }
            }
        }
    }
    census.last_owners = Some(LastOwners::Traced {
        traced_for_ms,
        time_wait_sockets: looked_up,
        found,
        before_trace,
        lookup_duration_us: t0.elapsed().as_micros() as u64,
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tuple_layout_follows_struct_tuple() {
        let t = tuple_bytes(
            0x1122_3344,
            "10.0.0.1:40000".parse().unwrap(),
            "10.0.0.2:5001".parse().unwrap(),
        );
        assert_eq!(&t[0..4], &[0x44, 0x33, 0x22, 0x11]);
        assert_eq!(&t[4..6], &40000u16.to_le_bytes());
        assert_eq!(&t[6..8], &5001u16.to_le_bytes());
        assert_eq!(&t[8..12], &[2, 0, 0, 0]);
        assert_eq!(&t[12..16], &[10, 0, 0, 1]);
        assert!(t[16..28].iter().all(|&b| b == 0));
        assert_eq!(&t[28..32], &[10, 0, 0, 2]);
        let v6 = tuple_bytes(
            1,
            "[::ffff:127.0.0.1]:40000".parse().unwrap(),
            "[::1]:80".parse().unwrap(),
        );
        assert_eq!(v6[8], 10);
        assert_eq!(
            &v6[12..28],
            &"::ffff:127.0.0.1"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets()
        );
        assert_eq!(v6[43], 1);
    }

    /// Reference values of `tuple_slot()`: `struct tuple` and the function cut out of
    /// bpf/trace.bpf.c unchanged, compiled for the host with clang 14 and run on these three
    /// tuples. The live test (`crates/cli/tests/sockets.rs`,
    /// `time_wait_sockets_are_attributed_to_the_process_that_closed_them`) checks the same
    /// against entries the kernel wrote: a socket is named only when the slot computed here
    /// holds its 4-tuple.
    #[test]
    fn slot_hash_matches_the_bpf_function() {
        let a = tuple_bytes(
            4026531840,
            "127.0.0.1:40000".parse().unwrap(),
            "127.0.0.1:5702".parse().unwrap(),
        );
        let b = tuple_bytes(
            4026532500,
            "[2001:db8::1]:51000".parse().unwrap(),
            "[2001:db8::2]:443".parse().unwrap(),
        );
        assert_eq!(tuple_slot(&[0u8; TUPLE_BYTES]), REF_ZERO);
        assert_eq!(tuple_slot(&a), REF_A);
        assert_eq!(tuple_slot(&b), REF_B);
        assert!(tuple_slot(&a) < HIST_SLOTS);
    }

    const REF_ZERO: u32 = 15158;
    const REF_A: u32 = 21160;
    const REF_B: u32 = 100680;

    #[test]
    fn entries_decode_from_the_slot_layout() {
        let mut b = [0u8; SLOT_BYTES];
        b[0..8].copy_from_slice(&4u64.to_le_bytes());
        b[8..52].copy_from_slice(&[7u8; TUPLE_BYTES]);
        b[56..64].copy_from_slice(&123_456u64.to_le_bytes());
        b[64..68].copy_from_slice(&3u32.to_le_bytes());
        b[68..72].copy_from_slice(&4242u32.to_le_bytes());
        b[72..79].copy_from_slice(b"python3");
        let e = Entry::decode(&b);
        assert_eq!(
            (e.seq, e.close_ns, e.how, e.tgid, e.comm.as_str()),
            (4, 123_456, 3, 4242, "python3")
        );
        assert_eq!(e.tuple, [7u8; TUPLE_BYTES]);
    }
}
