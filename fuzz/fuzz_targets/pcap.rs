//! Fuzzes the pcap reader: the input becomes the body of a pcap file (see
//! `tcpdoctor_capture::fuzzing::pcap_input`), read to the end; invariants are asserted.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tcpdoctor_capture::fuzzing;

fuzz_target!(|data: &[u8]| {
    fuzzing::read_all(&fuzzing::pcap_input(data));
});
