//! [`Guard`]: keeps a mapped capture file that shrinks while it is read (truncated by another
//! process) from killing the process with SIGBUS, so that the reader can report it like the
//! read path reports an input that ends early: a one-line error naming the byte offset.
//!
//! Reading a page of a file mapping that lies wholly past the file's end raises SIGBUS. A
//! guarded mapping is registered here; the SIGBUS handler (installed once, the first time a
//! file is mapped) recognises a fault inside a registered mapping, maps zero-filled memory
//! over the rest of it (so the access, repeated on return, reads zeros and the reader runs to
//! the end of the mapping), and records the offset of the first page that faulted. The reader
//! asks [`Guard::shrunk`] before it trusts what it read, and turns a shrunk file into an
//! error. A SIGBUS anywhere else puts the previous handler back, under which the faulting
//! access runs again: what it did before (the Rust runtime's, or the default) still happens.

use std::mem::MaybeUninit;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// At most this many mappings guarded at once (a merge opens one per input); a file mapped
/// past it is read instead.
const SLOTS: usize = 64;

struct Slot {
    used: AtomicBool,
    start: AtomicUsize,
    /// 0: the slot guards nothing.
    len: AtomicUsize,
    /// Offset of the first page that faulted; `usize::MAX`: none.
    fault: AtomicUsize,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: Slot = Slot {
    used: AtomicBool::new(false),
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    fault: AtomicUsize::new(usize::MAX),
};

static SLOT: [Slot; SLOTS] = [FREE; SLOTS];

/// The SIGBUS action found when the handler was installed (`None`: installing failed).
static PREVIOUS: OnceLock<Option<Previous>> = OnceLock::new();

struct Previous(libc::sigaction);
// SAFETY: plain data (a handler address, a signal mask, flags), only read after it is set.
unsafe impl Send for Previous {}
unsafe impl Sync for Previous {}

/// One guarded mapping; dropping it stops guarding (drop it before unmapping).
pub(crate) struct Guard {
    slot: usize,
}

impl Guard {
    /// Guards `len` bytes mapped at `start` (a file mapping from its first byte). `None`
    /// when the handler cannot be installed or every slot is taken: then do not map.
    pub(crate) fn new(start: *const u8, len: usize) -> Option<Guard> {
        PREVIOUS.get_or_init(install).as_ref()?;
        let slot = SLOT.iter().position(|s| {
            s.used
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        })?;
        let s = &SLOT[slot];
        s.start.store(start as usize, Ordering::Relaxed);
        s.fault.store(usize::MAX, Ordering::Relaxed);
        s.len.store(len, Ordering::Release);
        Some(Guard { slot })
    }

    /// The offset of the first page of the mapping found past the file's end, if one was.
    /// Bytes from there on read as zeros.
    pub(crate) fn shrunk(&self) -> Option<usize> {
        match SLOT[self.slot].fault.load(Ordering::Acquire) {
            usize::MAX => None,
            at => Some(at),
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let s = &SLOT[self.slot];
        s.len.store(0, Ordering::Release);
        s.used.store(false, Ordering::Release);
    }
}

/// The page size (known once a file was mapped; 4096 before).
pub(crate) fn page() -> usize {
    PAGE.load(Ordering::Relaxed)
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// Installs [`on_sigbus`]; the previous action, or `None` if sigaction failed.
fn install() -> Option<Previous> {
    PAGE.store(page_size(), Ordering::Relaxed);
    // SAFETY: sigaction with a zeroed struct filled in as the man page says; the handler only
    // makes async-signal-safe calls (atomics, mmap, sigaction).
    unsafe {
        let mut act: libc::sigaction = MaybeUninit::zeroed().assume_init();
        act.sa_sigaction = on_sigbus as *const () as usize;
        act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        libc::sigemptyset(&mut act.sa_mask);
        let mut old: libc::sigaction = MaybeUninit::zeroed().assume_init();
        if libc::sigaction(libc::SIGBUS, &act, &mut old) != 0 {
            return None;
        }
        Some(Previous(old))
    }
}

static PAGE: AtomicUsize = AtomicUsize::new(4096);

extern "C" fn on_sigbus(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    let page = PAGE.load(Ordering::Relaxed);
    for s in &SLOT {
        let len = s.len.load(Ordering::Acquire);
        let start = s.start.load(Ordering::Relaxed);
        if len == 0 || addr < start || addr >= start + len {
            continue;
        }
        let from = addr & !(page - 1);
        // SAFETY: replaces pages of the guarded mapping only (from its faulting page to its
        // end), which the reader reads and nothing else uses.
        let p = unsafe {
            libc::mmap(
                from as *mut libc::c_void,
                start + len - from,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            break;
        }
        s.fault.fetch_min(from - start, Ordering::AcqRel);
        return;
    }
    // SAFETY: restores the action sigaction returned (or the default one); the faulting
    // access then runs again under it.
    unsafe {
        if let Some(Some(prev)) = PREVIOUS.get() {
            libc::sigaction(libc::SIGBUS, &prev.0, ptr::null_mut());
        } else {
            libc::signal(libc::SIGBUS, libc::SIG_DFL);
        }
    }
}
