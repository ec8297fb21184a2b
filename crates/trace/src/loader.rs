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
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
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
    pub fn load(
        netns: Option<&[u32]>,
        quiet_reasons: &[u32],
        hooks: Hooks,
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
        let mut n = 0;
        while let Some(item) = self.ring.next() {
            f(Event::decode(&item));
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
