//! What the kernel says about the probe's own threads and connections, read where a
//! request's time needs explaining: each thread's wait for a CPU (schedstat `run_delay`,
//! Documentation/scheduler/sched-stats.rst), the host's CPU pressure, and a connection's
//! TCP_INFO. System calls only; no interpretation (see [`crate::split`]).

/// Nanoseconds the calling thread has spent runnable but waiting for a CPU since it started
/// (`run_delay`, the second field of `/proc/thread-self/schedstat`; Documentation/scheduler/
/// sched-stats.rst). `None` when the kernel does not keep it (no CONFIG_SCHED_INFO).
pub(crate) fn thread_run_delay_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_ascii_whitespace().nth(1)?.parse().ok()
}

/// The calling thread's schedstat, open for re-reading: `pread` at offset 0 renders it anew.
pub struct SchedStat {
    file: std::fs::File,
    first_ns: u64,
    last_ns: u64,
}

impl SchedStat {
    /// `None` when the kernel does not keep schedstats for threads (no CONFIG_SCHED_INFO).
    pub fn open() -> Option<SchedStat> {
        let file = std::fs::File::open("/proc/thread-self/schedstat").ok()?;
        let mut s = SchedStat {
            file,
            first_ns: 0,
            last_ns: 0,
        };
        s.first_ns = s.run_delay_ns()?;
        s.last_ns = s.first_ns;
        Some(s)
    }

    fn run_delay_ns(&self) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 128];
        let n = self.file.read_at(&mut buf, 0).ok()?;
        let text = std::str::from_utf8(&buf[..n]).ok()?;
        text.split_ascii_whitespace().nth(1)?.parse().ok()
    }

    /// The wait for a CPU since the previous reading.
    pub fn since_last_ns(&mut self) -> Option<u64> {
        let now = self.run_delay_ns()?;
        let d = now.saturating_sub(self.last_ns);
        self.last_ns = now;
        Some(d)
    }

    /// The wait for a CPU since it was opened.
    pub fn total_ns(&self) -> Option<u64> {
        self.run_delay_ns()
            .map(|now| now.saturating_sub(self.first_ns))
    }
}

/// Appends (ns since `t0`, the host's "some" CPU pressure total in ns) when
/// `/proc/pressure/cpu` can be read: how long some task waited for a CPU during any slice of
/// a run, at the resolution of the calls (one small read each).
pub(crate) fn cpu_some_sample(t0: std::time::Instant, out: &mut Vec<(u64, u64)>) {
    if let Ok(Some(us)) = tcpdoctor_host::pressure::cpu_some_total_us() {
        let at = t0.elapsed().as_nanos() as u64;
        out.push((at, us.saturating_mul(1_000)));
    }
}
