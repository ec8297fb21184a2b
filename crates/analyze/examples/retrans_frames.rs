//! Prints the frame number and kind of every retransmission in a capture, one per line, to
//! cross-check against `tshark -Y tcp.analysis.retransmission -T fields -e frame.number`.
//!
//! Usage: cargo run --release -p tcpdoctor-analyze --example retrans_frames -- FILE

use tcpdoctor_analyze::{Analyzer, Config};
use tcpdoctor_capture::Reader;

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: retrans_frames FILE");
        std::process::exit(2);
    };
    let mut r = match Reader::open(std::path::Path::new(&path)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let mut a = Analyzer::new(Config {
        keep_retransmissions: true,
        ..Config::default()
    });
    loop {
        match r.next_segment() {
            Ok(Some(s)) => a.push(&s),
            Ok(None) => break,
            Err(e) => {
                eprintln!("{e}");
                break;
            }
        }
    }
    for (frame, kind) in a.finish().retransmitted {
        println!("{frame} {kind:?}");
    }
}
