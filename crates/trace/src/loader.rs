//! Loads the committed BPF object (bpf/trace.bpf.o, built from bpf/trace.bpf.c by
//! bpf/build.sh) with aya, attaches its programs by BTF (tp_btf, fentry, fexit: no tracefs,
//! no kernel headers), and reads what it recorded: the ring buffer of events and the per-CPU
//! counters. Dropping a [`Probe`] detaches everything.
//!
//! Only tracepoints: fentry/fexit need ftrace trampolines, which some kernels' security
//! policies refuse (this project's machines return EPERM for them), and kprobes are often
//! compiled out. The optional ones (`tcp_probe`) may be missing on older kernels; their
//! evidence is then missing and [`Probe::unavailable`] says so.

use std::collections::BTreeMap;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use aya::maps::{Array, MapData, PerCpuArray, RingBuf};
use aya::programs::BtfTracePoint;
use aya::{Btf, Ebpf, EbpfLoader};

use crate::history::SLOT_BYTES;
use crate::raw::{Counter, Event, Undecodable};
use crate::Error;

/// The compiled object, embedded so that building tcpdoctor needs no clang.
static OBJECT: &[u8] = aya::include_bytes_aligned!("../bpf/trace.bpf.o");

/// (program name in the object, kernel tracepoint, required).
const PROGRAMS: &[(&str, &str, bool)] = &[
    ("tcp_retransmit_skb", "tcp_retransmit_skb", true),
    ("tcp_retransmit_synack", "tcp_retransmit_synack", true),
    ("tcp_send_reset", "tcp_send_reset", true),
    ("tcp_receive_reset", "tcp_receive_reset", true),
    ("inet_sock_set_state", "inet_sock_set_state", true),
    ("kfree_skb", "kfree_skb", true),
    ("tcp_probe", "tcp_probe", false),
];

/// Which programs to attach.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Hooks {
    /// Every program: the full trace.
    #[default]
    All,
    /// Only the state-change program, which records connect() owners and each close in the
    /// history table: what naming the last owners of TIME_WAIT sockets needs, at a fraction
    /// of the full trace's cost per connection.
    CloseHistory,
}

impl Hooks {
    fn wants(self, program: &str) -> bool {
        match self {
            Hooks::All => true,
            Hooks::CloseHistory => program == "inet_sock_set_state",
        }
    }
}

/// A piece of evidence this kernel cannot give, and why.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Unavailable {
    /// Kernel function or tracepoint.
    pub hook: String,
    pub reason: String,
}

/// The loaded and attached BPF programs.
pub struct Probe {
    ebpf: Ebpf,
    ring: RingBuf<MapData>,
    unavailable: Vec<Unavailable>,
}

/// Checks what tracing needs before trying: BTF of the running kernel.
pub fn check_support() -> Result<(), Error> {
    if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        return Err(Error::MissingBtf);
    }
    Ok(())
}

fn is_permission(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cur {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            if matches!(io.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) {
                return true;
            }
        }
        let s = c.to_string();
        if s.contains("Operation not permitted") || s.contains("Permission denied") {
            return true;
        }
        cur = c.source();
    }
    false
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

impl Probe {
    /// Loads and attaches. `netns`: trace only these namespace inodes (`None`: every
    /// namespace).
    /// `connections`: report every connection's close (`K_CLOSED` records).
    pub fn load(
        netns: Option<&[u32]>,
        quiet_reasons: &[u32],
        hooks: Hooks,
        connections: bool,
    ) -> Result<Probe, Error> {
        check_support()?;
        let btf =
            Btf::from_sys_fs().map_err(|e| Error::Load(format!("reading kernel BTF: {e}")))?;
        let filter: u32 = u32::from(netns.is_some());
        let one: u32 = match netns {
            Some([ino]) => *ino,
            _ => 0,
        };
        let mut ebpf = EbpfLoader::new()
            .btf(Some(&btf))
            .override_global("filter_netns", &filter, true)
            .override_global("filter_netns_one", &one, true)
            .override_global("track_connections", &u32::from(connections), true)
            .load(OBJECT)
            .map_err(|e| {
                if is_permission(&e) {
                    Error::Privilege
                } else {
                    Error::Load(chain(&e))
                }
            })?;
        if let Some(list) = netns {
            let map = ebpf
                .map_mut("netns_filter")
                .ok_or_else(|| Error::Load("map netns_filter missing from the object".into()))?;
            let mut m: aya::maps::HashMap<&mut MapData, u32, u8> =
                aya::maps::HashMap::try_from(map).map_err(|e| Error::Load(chain(&e)))?;
            for ino in list {
                m.insert(ino, 1, 0).map_err(|e| Error::Load(chain(&e)))?;
            }
        }
        if !quiet_reasons.is_empty() {
            let map = ebpf
                .map_mut("quiet_reasons")
                .ok_or_else(|| Error::Load("map quiet_reasons missing from the object".into()))?;
            let mut m: aya::maps::Array<&mut MapData, u32> =
                aya::maps::Array::try_from(map).map_err(|e| Error::Load(chain(&e)))?;
            for &r in quiet_reasons {
                if r < 1024 {
                    m.set(r, 1, 0).map_err(|e| Error::Load(chain(&e)))?;
                }
            }
        }
        let mut unavailable = Vec::new();
        for &(name, target, required) in PROGRAMS.iter().filter(|p| hooks.wants(p.0)) {
            let r = attach(&mut ebpf, &btf, name, target);
            if let Err(e) = r {
                if is_permission(e.as_ref()) {
                    return Err(Error::Privilege);
                }
                if required {
                    return Err(Error::Attach {
                        hook: target.to_string(),
                        message: chain(e.as_ref()),
                    });
                }
                unavailable.push(Unavailable {
                    hook: target.to_string(),
                    reason: chain(e.as_ref()),
                });
            }
        }
        let ring_map = ebpf
            .take_map("events")
            .ok_or_else(|| Error::Load("map events missing from the object".into()))?;
        let ring = RingBuf::try_from(ring_map).map_err(|e| Error::Load(chain(&e)))?;
        Ok(Probe {
            ebpf,
            ring,
            unavailable,
        })
    }

    /// Hooks this kernel could not attach (their evidence is missing from the run).
    pub fn unavailable(&self) -> &[Unavailable] {
        &self.unavailable
    }

    /// Takes every record waiting in the ring buffer.
    pub fn drain(&mut self, mut f: impl FnMut(Result<Event, Undecodable>)) -> usize {
        self.drain_bytes(|b| f(Event::decode(b)))
    }

    /// Takes every record waiting in the ring buffer, as the kernel wrote its bytes (a
    /// recording keeps them: [`crate::recording`]).
    pub fn drain_bytes(&mut self, mut f: impl FnMut(&[u8])) -> usize {
        let mut n = 0;
        while let Some(item) = self.ring.next() {
            f(&item);
            n += 1;
        }
        n
    }

    /// The kernel-side counters, summed over CPUs.
    pub fn counters(&self) -> Result<BTreeMap<Counter, u64>, Error> {
        let map = self
            .ebpf
            .map("counts")
            .ok_or_else(|| Error::Load("map counts missing".into()))?;
        let arr: PerCpuArray<&MapData, u64> =
            PerCpuArray::try_from(map).map_err(|e| Error::Read(chain(&e)))?;
        let mut out = BTreeMap::new();
        for c in Counter::ALL {
            let v = arr
                .get(&(c as u32), 0)
                .map_err(|e| Error::Read(chain(&e)))?;
            out.insert(c, v.iter().sum());
        }
        Ok(out)
    }

    /// The raw bytes of slot `idx` of the history table (`struct hist_slot`), one map
    /// lookup (see [`crate::history`]).
    pub fn history_slot(&self, idx: u32) -> Result<[u8; SLOT_BYTES], Error> {
        let map = self
            .ebpf
            .map("history")
            .ok_or_else(|| Error::Load("map history missing".into()))?;
        let arr: Array<&MapData, [u8; SLOT_BYTES]> =
            Array::try_from(map).map_err(|e| Error::Read(chain(&e)))?;
        arr.get(&idx, 0).map_err(|e| Error::Read(chain(&e)))
    }

    /// Events the kernel did not run a program for, per tracepoint, when any: the program
    /// was already running on that CPU (an interrupt's softirq hit the same tracepoint while
    /// the program ran in process context), and the kernel skips the nested run rather than
    /// re-enter it (`bpf_prog_info.recursion_misses`, counted per program since it was
    /// loaded). Such an event is in no count, no record and no kernel-side counter of the
    /// trace, though the kernel's own counters (nstat) count it. The kernel skips before the
    /// program can look at the namespace: a skipped event may be of any namespace, so for a
    /// trace of some namespaces the number is an upper bound of what it missed.
    ///
    /// A hook whose count the kernel does not give (before 5.12) is in the second list: its
    /// skips are unknown, not zero.
    pub fn missed(&self) -> (BTreeMap<String, u64>, Vec<Unavailable>) {
        let mut out = BTreeMap::new();
        let mut unknown = Vec::new();
        for &(name, target, _) in PROGRAMS {
            // Not attached (optional, or not wanted): nothing to count.
            let Some(fd) = self.ebpf.program(name).and_then(|p| p.fd().ok()) else {
                continue;
            };
            match recursion_misses(fd.as_fd()) {
                Some(0) => {}
                Some(n) => {
                    out.insert(target.to_string(), n);
                }
                None => unknown.push(Unavailable {
                    hook: format!("{target} (events skipped)"),
                    reason: "this kernel does not report bpf_prog_info.recursion_misses: events it skipped are not counted".into(),
                }),
            }
        }
        (out, unknown)
    }

    /// TCP packets dropped, per kernel drop-reason value, summed over CPUs.
    pub fn drop_reasons(&self) -> Result<BTreeMap<u32, u64>, Error> {
        let map = self
            .ebpf
            .map("drop_reasons")
            .ok_or_else(|| Error::Load("map drop_reasons missing".into()))?;
        let arr: PerCpuArray<&MapData, u64> =
            PerCpuArray::try_from(map).map_err(|e| Error::Read(chain(&e)))?;
        let mut out = BTreeMap::new();
        for (i, v) in arr.iter().enumerate() {
            let v = v.map_err(|e| Error::Read(chain(&e)))?;
            let n: u64 = v.iter().sum();
            if n > 0 {
                out.insert(i as u32, n);
            }
        }
        Ok(out)
    }
}

/// `recursion_misses` of the program behind `fd` (BPF_OBJ_GET_INFO_BY_FD; kernel 5.12 and
/// later), or None when the kernel does not say.
fn recursion_misses(fd: BorrowedFd<'_>) -> Option<u64> {
    use aya_obj::generated::{bpf_cmd, bpf_prog_info};
    /// The `info` member of `union bpf_attr`.
    #[repr(C)]
    struct InfoByFd {
        bpf_fd: u32,
        info_len: u32,
        info: u64,
    }
    // SAFETY: bpf_prog_info is plain data (integers and arrays of them): all zeros is a
    // valid value.
    let mut info: bpf_prog_info = unsafe { std::mem::zeroed() };
    let len = std::mem::offset_of!(bpf_prog_info, recursion_misses) + std::mem::size_of::<u64>();
    let mut attr = InfoByFd {
        bpf_fd: fd.as_raw_fd() as u32,
        info_len: len as u32,
        info: &mut info as *mut bpf_prog_info as u64,
    };
    // SAFETY: the kernel writes at most `info_len` bytes to `info`, which points to a live
    // bpf_prog_info of at least that size; `attr` outlives the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            bpf_cmd::BPF_OBJ_GET_INFO_BY_FD as libc::c_int,
            &mut attr as *mut InfoByFd,
            std::mem::size_of::<InfoByFd>() as u32,
        )
    };
    // A kernel older than the field fills less than asked for and says so in info_len.
    (r == 0 && attr.info_len as usize >= len).then_some(info.recursion_misses)
}

fn attach(
    ebpf: &mut Ebpf,
    btf: &Btf,
    name: &str,
    target: &str,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let prog = ebpf
        .program_mut(name)
        .ok_or_else(|| format!("program {name} missing from the object"))?;
    let p: &mut BtfTracePoint = prog.try_into()?;
    p.load(target, btf)?;
    p.attach()?;
    Ok(())
}
