//! Fuzzes format detection (pcap, pcapng, snoop, gzip) on raw input bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tcpdoctor_capture::fuzzing;

fuzz_target!(|data: &[u8]| {
    fuzzing::read_all(data);
});
