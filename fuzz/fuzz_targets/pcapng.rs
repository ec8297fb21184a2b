//! Fuzzes the pcapng reader: the input becomes the body of a pcapng file (see
//! `tcpdoctor_capture::fuzzing::pcapng_input`), read to the end; invariants are asserted.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tcpdoctor_capture::fuzzing;

fuzz_target!(|data: &[u8]| {
    fuzzing::read_all(&fuzzing::pcapng_input(data));
});
