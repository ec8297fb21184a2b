//! Bulk transfers between processes a test starts in its namespaces (perl, so that each end
//! is a process of its own whose pid a report can name): a reader that drains at a set pace
//! with a set SO_RCVBUF, a writer with a set SO_SNDBUF and congestion control. Each is bounded
//! in time (12 s reading, 8 s writing) and killed with its namespace.

use std::process::Child;
use std::time::{Duration, Instant};

use super::Netns;

/// Reads from one connection on PORT: `chunk` bytes per read, `pause` seconds between reads,
/// for at most `secs` seconds; SO_RCVBUF set on the listener (inherited) unless 0.
pub const READER: &str = r#"use Socket; use Time::HiRes qw(sleep time);
my ($addr, $port, $rcvbuf, $chunk, $pause, $secs) = @ARGV;
socket(my $l, PF_INET, SOCK_STREAM, 0) or die "socket: $!";
setsockopt($l, SOL_SOCKET, SO_REUSEADDR, 1) or die;
if ($rcvbuf) { setsockopt($l, SOL_SOCKET, SO_RCVBUF, int($rcvbuf)) or die "rcvbuf: $!" }
bind($l, sockaddr_in($port, inet_aton($addr))) or die "bind: $!";
listen($l, 4) or die "listen: $!";
accept(my $c, $l) or die "accept: $!";
my $end = time + $secs;
while (time < $end) { my $r = sysread($c, my $b, $chunk); last if !$r; sleep $pause if $pause > 0 }"#;

/// Writes 64 KiB blocking writes to HOST:PORT for at most `secs` seconds; SO_SNDBUF set
/// before connect unless 0, the congestion control (IPPROTO_TCP 6, TCP_CONGESTION 13) unless "-".
pub const WRITER: &str = r#"use Socket; use Time::HiRes qw(time);
my ($host, $port, $sndbuf, $secs, $cc) = @ARGV;
socket(my $s, PF_INET, SOCK_STREAM, 0) or die "socket: $!";
if ($sndbuf) { setsockopt($s, SOL_SOCKET, SO_SNDBUF, int($sndbuf)) or die "sndbuf: $!" }
if ($cc ne "-") { setsockopt($s, 6, 13, $cc) or die "congestion control: $!" }
connect($s, sockaddr_in($port, inet_aton($host))) or die "connect: $!";
my $buf = "x" x 65536; my $end = time + $secs;
while (time < $end) { defined(syswrite($s, $buf)) or last }"#;

pub fn perl(ns: &Netns, script: &str, args: &[String]) -> Child {
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    ns.spawn(&format!(
        "exec perl -e '{}' {}",
        script.replace('\'', "'\\''"),
        quoted.join(" ")
    ))
}

/// A reader on ADDR:PORT in `ns`, listening when this returns.
pub fn reader(ns: &Netns, addr: &str, port: u16, rcvbuf: u32, chunk: u32, pause: &str) -> Child {
    let child = perl(
        ns,
        READER,
        &[
            addr.into(),
            port.to_string(),
            rcvbuf.to_string(),
            chunk.to_string(),
            pause.into(),
            "12".into(),
        ],
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while !ns
        .exec(&format!("ss -Hltn sport = :{port}"))
        .contains(&port.to_string())
    {
        assert!(Instant::now() < deadline, "the reader did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

pub fn writer(ns: &Netns, host: &str, port: u16, sndbuf: u32, cc: &str) -> Child {
    perl(
        ns,
        WRITER,
        &[
            host.into(),
            port.to_string(),
            sndbuf.to_string(),
            "8".into(),
            cc.into(),
        ],
    )
}
