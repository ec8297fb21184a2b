//! `tcpdoctor analyze` against captures made here by tcpdump in namespaces we create, with
//! traffic from small generators in this file (std sockets on threads that entered the
//! namespace with setns). Each scenario must be diagnosed with its pathology; the clean one
//! with none. Plus: the retransmission count agrees with tshark, and read errors keep the
//! findings made before them.

mod support;

#[path = "analyze/small_samples.rs"]
mod small_samples;

#[path = "analyze/public.rs"]
mod public;

#[path = "analyze/time.rs"]
mod time;

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::FromRawFd;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{spawn_in_netns, Netns};

/// Listens on `addr` inside `ns` and runs `f` with the listener on that thread; returns once
/// the socket is listening.
fn serve<T: Send + 'static>(
    ns: &Netns,
    addr: &str,
    rcvbuf: Option<i32>,
    f: impl FnOnce(TcpListener) -> T + Send + 'static,
) -> JoinHandle<T> {
    let addr = v4(addr);
    let (tx, rx) = std::sync::mpsc::channel();
    let h = spawn_in_netns(ns, move || {
        let l = listener(addr, rcvbuf);
        tx.send(()).unwrap();
        f(l)
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("listener ready");
    h
}

fn check(rc: libc::c_int, what: &str) {
    assert!(rc >= 0, "{what}: {}", std::io::Error::last_os_error());
}

fn sockaddr(a: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*a.ip()).to_be(),
        },
        sin_zero: [0; 8],
    }
}

fn setopt(fd: i32, level: i32, name: i32, v: i32) {
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            &v as *const i32 as *const libc::c_void,
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    check(rc, "setsockopt");
}

/// A listener with SO_REUSEADDR and, if given, SO_RCVBUF set before listen() (so the window
/// scale of accepted connections follows it).
fn listener(addr: SocketAddrV4, rcvbuf: Option<i32>) -> TcpListener {
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        check(fd, "socket");
        setopt(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1);
        if let Some(b) = rcvbuf {
            setopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, b);
        }
        let sa = sockaddr(addr);
        check(
            libc::bind(
                fd,
                &sa as *const _ as *const libc::sockaddr,
                std::mem::size_of_val(&sa) as u32,
            ),
            "bind",
        );
        check(libc::listen(fd, 128), "listen");
        TcpListener::from_raw_fd(fd)
    }
}

/// Connects from a fixed local address (SO_REUSEADDR), like a client that binds its port.
fn connect_from(local: SocketAddrV4, remote: SocketAddrV4) -> TcpStream {
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        check(fd, "socket");
        setopt(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1);
        let la = sockaddr(local);
        check(
            libc::bind(
                fd,
                &la as *const _ as *const libc::sockaddr,
                std::mem::size_of_val(&la) as u32,
            ),
            "bind local",
        );
        let ra = sockaddr(remote);
        check(
            libc::connect(
                fd,
                &ra as *const _ as *const libc::sockaddr,
                std::mem::size_of_val(&ra) as u32,
            ),
            "connect",
        );
        TcpStream::from_raw_fd(fd)
    }
}

fn v4(s: &str) -> SocketAddrV4 {
    match s.parse::<SocketAddr>().unwrap() {
        SocketAddr::V4(a) => a,
        SocketAddr::V6(_) => unreachable!(),
    }
}

/// A temporary capture file, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(tag: &str) -> TempFile {
        TempFile(
            std::env::temp_dir().join(format!("tdoc-analyze-{tag}-{}.pcap", support::unique_id())),
        )
    }
    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if std::env::var_os("TDOC_KEEP_CAPTURES").is_some() {
            eprintln!("kept {}", self.0.display());
            return;
        }
        let _ = std::fs::remove_file(&self.0);
    }
}

/// tcpdump running inside a namespace; `stop` ends it cleanly (SIGINT flushes the file).
struct Tcpdump(Child);

impl Tcpdump {
    fn start(ns: &Netns, iface: &str, file: &TempFile) -> Tcpdump {
        let mut child = Command::new("ip")
            .args([
                "netns",
                "exec",
                &ns.name,
                "tcpdump",
                "-i",
                iface,
                "-s",
                "128",
                "-B",
                "16384",
                "--immediate-mode",
                "-U",
                "-n",
                "-w",
            ])
            .arg(file.path())
            .arg("tcp")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn tcpdump");
        // tcpdump says "listening on" once its socket is bound and filtering.
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            line.clear();
            if err.read_line(&mut line).unwrap_or(0) == 0 || line.contains("listening on") {
                break;
            }
        }
        assert!(
            line.contains("listening on"),
            "tcpdump did not start: {line}"
        );
        thread::spawn(move || {
            let mut sink = String::new();
            let _ = err.read_to_string(&mut sink);
        });
        Tcpdump(child)
    }

    fn stop(mut self) {
        thread::sleep(Duration::from_millis(300));
        unsafe { libc::kill(self.0.id() as i32, libc::SIGINT) };
        let _ = self.0.wait();
    }
}

/// Two namespaces joined by a veth pair: (client ns, server ns, client if, server if).
fn pair(tag: &str, net: u8) -> (Netns, Netns, String, String) {
    let a = Netns::new(&format!("{tag}c"));
    let b = Netns::new(&format!("{tag}s"));
    let (ia, ib) = support::veth(
        &a,
        &format!("10.77.{net}.1/24"),
        &b,
        &format!("10.77.{net}.2/24"),
    );
    (a, b, ia, ib)
}

fn analyze(file: &TempFile, extra: &[&str]) -> (i32, Value) {
    let mut args = vec!["analyze", file.path(), "--json"];
    args.extend_from_slice(extra);
    let (code, out, err) = support::run(&args);
    let v = support::json(&out, &err);
    assert!(code == 0 || code == 1, "exit {code}: {err}");
    (code, v)
}

fn pathologies(v: &Value) -> Vec<String> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["pathology"].as_str().unwrap().to_string())
        .collect()
}

fn finding<'a>(v: &'a Value, p: &str) -> &'a Value {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["pathology"] == p)
        .unwrap_or_else(|| panic!("no {p} finding in {:#}", v["findings"]))
}

#[test]
fn clean_keep_alive_traffic_has_no_finding() {
    if !support::require_root_and_tools("clean_keep_alive_traffic_has_no_finding", &["tcpdump"]) {
        return;
    }
    let (c, s, ic, _) = pair("ancl", 11);
    let file = TempFile::new("clean");
    let server = serve(&s, "10.77.11.2:7001", None, move |srv| {
        let (mut conn, _) = srv.accept().unwrap();
        let mut buf = [0u8; 100];
        while conn.read_exact(&mut buf).is_ok() {
            conn.write_all(&[7u8; 300]).unwrap();
        }
    });
    let dump = Tcpdump::start(&c, &ic, &file);
    spawn_in_netns(&c, || {
        let mut conn = TcpStream::connect("10.77.11.2:7001").unwrap();
        conn.set_nodelay(true).unwrap();
        let mut reply = [0u8; 300];
        for _ in 0..40 {
            conn.write_all(&[1u8; 100]).unwrap();
            conn.read_exact(&mut reply).unwrap();
            thread::sleep(Duration::from_millis(20));
        }
    })
    .join()
    .unwrap();
    server.join().unwrap();
    dump.stop();
    let (code, v) = analyze(&file, &[]);
    assert_eq!(
        v["findings"].as_array().unwrap().len(),
        0,
        "{:#}",
        v["findings"]
    );
    assert_eq!(code, 0);
    assert_eq!(v["verdict"], "healthy");
    assert_eq!(v["totals"]["connections"], 1);
    assert_eq!(v["totals"]["retransmissions"], 0);
    assert!(
        v["totals"]["data_segments"].as_u64().unwrap() >= 80,
        "{:#}",
        v["totals"]
    );
    assert_eq!(v["capture"]["undecodable"], 0);
}

#[test]
fn dropped_syns_are_syn_retransmissions_on_the_linear_ladder() {
    if !support::require_root_and_tools(
        "dropped_syns_are_syn_retransmissions_on_the_linear_ladder",
        &["tcpdump"],
    ) {
        return;
    }
    let (c, s, ic, _) = pair("ansyn", 12);
    // Drop two SYNs of every three at the server: each connect waits for 2 retransmissions.
    s.exec(
        "nft add table inet tdocsyn && nft add chain inet tdocsyn in \"{ type filter hook input priority 0; }\" && nft add rule inet tdocsyn in tcp dport 7002 tcp flags \\& \\(syn \\| ack\\) == syn numgen inc mod 3 \\< 2 drop",
    );
    c.sysctl("net.ipv4.tcp_syn_linear_timeouts", "4");
    let file = TempFile::new("syn");
    let server = serve(&s, "10.77.12.2:7002", None, move |srv| {
        for _ in 0..2 {
            let (mut conn, _) = srv.accept().unwrap();
            let mut b = [0u8; 1];
            let _ = conn.read(&mut b);
        }
    });
    let dump = Tcpdump::start(&c, &ic, &file);
    let delays = spawn_in_netns(&c, || {
        (0..2)
            .map(|_| {
                let t = Instant::now();
                let mut conn = TcpStream::connect("10.77.12.2:7002").unwrap();
                let d = t.elapsed();
                conn.write_all(b"x").unwrap();
                d
            })
            .collect::<Vec<_>>()
    })
    .join()
    .unwrap();
    server.join().unwrap();
    dump.stop();
    assert!(
        delays.iter().all(|d| *d >= Duration::from_millis(1900)),
        "{delays:?}"
    );
    let (code, v) = analyze(&file, &[]);
    assert_eq!(code, 1);
    let f = finding(&v, "syn_retransmit");
    assert_eq!(f["severity"], "critical");
    let d = &v["details"]["syn_retransmits"];
    assert_eq!(d["connections"], 2, "{d:#}");
    assert_eq!(d["ladder"], "linear", "{d:#}");
    assert_eq!(d["by_retransmissions"][0]["retransmissions"], 2);
    assert_eq!(d["by_retransmissions"][0]["connections"], 2);
    // Two 1 s rungs, with room for a timer that runs late on a busy 2-CPU machine, below
    // the 3 s the exponential ladder would take.
    let delay = d["max_connect_delay_us"].as_u64().unwrap();
    assert!((1_990_000..2_900_000).contains(&delay), "{delay}");
    // Evidence names the three SYNs and the SYN-ACK of a connection.
    let frames = f["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "packets")
        .unwrap()["frames"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(frames, 4);
    assert!(!pathologies(&v).contains(&"time_wait_collision".to_string()));
}

#[test]
fn port_reuse_into_time_wait_without_timestamps_collides() {
    if !support::require_root_and_tools(
        "port_reuse_into_time_wait_without_timestamps_collides",
        &["tcpdump"],
    ) {
        return;
    }
    let (c, s, ic, _) = pair("antw", 13);
    for ns in [&c, &s] {
        ns.sysctl("net.ipv4.tcp_timestamps", "0");
        ns.sysctl("net.ipv4.tcp_rfc1337", "0");
    }
    const BYTES: usize = 64 << 20;
    let file = TempFile::new("tw");
    // The server reads the upload and closes first, so it holds TIME_WAIT.
    let server = serve(&s, "10.77.13.2:7003", None, move |srv| {
        for _ in 0..2 {
            let (mut conn, _) = srv.accept().unwrap();
            let mut buf = vec![0u8; 1 << 16];
            let mut got = 0;
            while got < BYTES {
                match conn.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got += n,
                }
            }
            drop(conn);
        }
    });
    let dump = Tcpdump::start(&c, &ic, &file);
    let second = spawn_in_netns(&c, || {
        let local = v4("10.77.13.1:20013");
        let remote = v4("10.77.13.2:7003");
        let mut conn = connect_from(local, remote);
        let chunk = vec![0u8; 1 << 16];
        for _ in 0..BYTES / chunk.len() {
            conn.write_all(&chunk).unwrap();
        }
        let mut b = [0u8; 16];
        while conn.read(&mut b).map(|n| n > 0).unwrap_or(false) {}
        drop(conn);
        thread::sleep(Duration::from_millis(100));
        // Same 4-tuple again: the ISN has not caught up with 64 MiB of old sequence space.
        let t = Instant::now();
        let conn = connect_from(local, remote);
        let d = t.elapsed();
        drop(conn);
        d
    })
    .join()
    .unwrap();
    server.join().unwrap();
    dump.stop();
    // Linux 6.x re-arms the SYN timer at TCP_TIMEOUT_MIN after resetting a stale ACK
    // (tcp_rcv_synsent_state_process): the collision costs milliseconds, not the 1 s RTO.
    assert!(
        second >= Duration::from_millis(2),
        "second connect took {second:?}"
    );
    let (code, v) = analyze(&file, &[]);
    let f = finding(&v, "time_wait_collision");
    let d = &v["details"]["time_wait_collisions"];
    assert_eq!(d["count"], 1, "{d:#}");
    assert_eq!(d["timestamps_off"], 1);
    assert_eq!(d["isn_not_above_previous"], 1);
    let reuse = d["min_reuse_interval_us"].as_u64().unwrap();
    assert!((50_000..1_000_000).contains(&reuse), "{reuse}");
    let delay = d["max_connect_delay_us"].as_u64().unwrap();
    let measured = second.as_micros() as u64;
    // The capture's delay fits inside what connect() measured (which also waits for the
    // scheduler on a busy machine).
    assert!(
        delay >= 1_000 && delay <= measured + 2_000,
        "{delay} us vs {measured} us"
    );
    // One collision of two connection attempts: judged by its stall alone (a share of two is
    // no evidence, policy): a few milliseconds are info, a 1 s RTO (older kernels) critical.
    let sev = if delay >= 1_000_000 {
        "critical"
    } else if delay >= 200_000 {
        "warning"
    } else {
        "info"
    };
    assert_eq!(f["severity"], sev, "{f:#}");
    assert_eq!(code, if sev == "info" { 0 } else { 1 });
    // Evidence: last packet of the old connection, SYN, stale ACK, RST, SYN, SYN-ACK.
    let frames = f["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "packets")
        .unwrap()["frames"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(frames, 6, "{f:#}");
    assert!(f["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["kind"] == "setting" && e["value"] == "off"));
    assert_eq!(v["totals"]["reused_ports"], 1);
    // The collision explains the SYN retransmission: it is not reported twice.
    assert!(
        !pathologies(&v).contains(&"syn_retransmit".to_string()),
        "{:?}",
        pathologies(&v)
    );
}

/// Eight senders answer one receiver through a shallow tbf queue, round after round; returns
/// the exit code and JSON of `analyze` on the senders' capture, and the slowest round.
fn incast_capture(rto_min: Option<&str>) -> (i32, Value, Duration) {
    // senders (S) -- router (M, tbf with a shallow queue toward R) -- receiver (R).
    let snd = Netns::new("anics");
    let mid = Netns::new("anicm");
    let rcv = Netns::new("anicr");
    let (is, _) = support::veth(&snd, "10.77.14.1/24", &mid, "10.77.14.2/24");
    let (im, _) = support::veth(&mid, "10.77.15.1/24", &rcv, "10.77.15.2/24");
    mid.sysctl("net.ipv4.ip_forward", "1");
    match rto_min {
        Some(r) => snd.exec(&format!(
            "ip route add 10.77.15.0/24 via 10.77.14.2 rto_min {r}"
        )),
        None => snd.exec("ip route add 10.77.15.0/24 via 10.77.14.2"),
    };
    rcv.exec("ip route add 10.77.14.0/24 via 10.77.15.1");
    mid.exec(&format!(
        "tc qdisc add dev {im} root tbf rate 100mbit burst 16kb limit 12kb"
    ));
    // No tail loss probes: tail drops must wait for the RTO, as on the kernels of file 001.
    snd.sysctl("net.ipv4.tcp_early_retrans", "0");
    const FLOWS: usize = 8;
    const BLOCK: usize = 96 * 1024;
    const ROUNDS: usize = 12;
    let file = TempFile::new("incast");
    // The receiver (like a Riak coordinator) asks all senders at once; each answers a block.
    let dump = Tcpdump::start(&snd, &is, &file);
    let receiver = serve(&rcv, "10.77.15.2:7004", None, move |lst| {
        let mut conns: Vec<TcpStream> = (0..FLOWS).map(|_| lst.accept().unwrap().0).collect();
        let mut buf = vec![0u8; BLOCK];
        let mut worst = Duration::ZERO;
        for _ in 0..ROUNDS {
            let t = Instant::now();
            for c in &mut conns {
                c.write_all(b"g").unwrap();
            }
            for c in &mut conns {
                c.read_exact(&mut buf).unwrap();
            }
            worst = worst.max(t.elapsed());
        }
        worst
    });
    let senders: Vec<_> = (0..FLOWS)
        .map(|_| {
            spawn_in_netns(&snd, || {
                let mut c = TcpStream::connect("10.77.15.2:7004").unwrap();
                c.set_nodelay(true).unwrap();
                let block = vec![3u8; BLOCK];
                let mut req = [0u8; 1];
                for _ in 0..ROUNDS {
                    c.read_exact(&mut req).unwrap();
                    c.write_all(&block).unwrap();
                }
            })
        })
        .collect();
    for s in senders {
        s.join().unwrap();
    }
    let worst = receiver.join().unwrap();
    dump.stop();
    let (code, v) = analyze(&file, &[]);
    (code, v, worst)
}

#[test]
fn tbf_bottleneck_with_several_senders_is_incast() {
    if !support::require_root_and_tools(
        "tbf_bottleneck_with_several_senders_is_incast",
        &["tcpdump"],
    ) {
        return;
    }
    // Synchronized tail losses are likely, not certain, on a shared 2-core machine: the
    // traffic is made up to 3 times until it timed out together; the detector is then held to
    // every property below. (If three runs never produce them, something is broken.)
    let mut attempt = 0;
    let (code, v, worst) = loop {
        attempt += 1;
        let (code, v, worst) = incast_capture(None);
        if attempt == 3 || pathologies(&v).contains(&"incast".to_string()) {
            break (code, v, worst);
        }
        eprintln!("attempt {attempt}: no incast in the capture (worst round {worst:?}); again");
    };
    assert_eq!(code, 1);
    let p = pathologies(&v);
    assert!(
        p.contains(&"incast".to_string()),
        "worst round {worst:?}; {p:?}\n{:#}",
        v["details"]["retransmit_timeouts"]
    );
    let eps = v["details"]["incast"].as_array().unwrap();
    assert!(!eps.is_empty());
    for e in eps {
        assert_eq!(e["receiver"], "10.77.15.2");
        let lost = e["flows_lost"].as_u64().unwrap();
        let fan_in = e["fan_in"].as_u64().unwrap();
        // Either several flows lost segments together, or every sender (3 or more) went
        // silent until one flow's timeout (the barrier form), or a flow waited for a timeout
        // after an earlier synchronized episode of its round.
        let together = lost >= 3 && lost * 4 >= fan_in;
        let barrier = e["receiver_silent_us"].as_u64().unwrap() >= 180_000 && fan_in >= 3;
        let joined = e["joined_round"] == true && e["stall_us"].as_u64().unwrap() >= 180_000;
        assert!(together || barrier || joined, "{e:#}");
        assert!(fan_in >= lost, "{e:#}");
    }
    // With the default RTO floor, the worst repair of some episode waited for a timeout.
    assert!(
        eps.iter()
            .any(|e| e["stall_us"].as_u64().unwrap() >= 180_000),
        "{eps:#?}"
    );
    assert!(v["totals"]["retransmissions_rto"].as_u64().unwrap() >= 3);
}

#[test]
fn slow_reader_with_16k_receive_buffer_shows_zero_windows() {
    if !support::require_root_and_tools(
        "slow_reader_with_16k_receive_buffer_shows_zero_windows",
        &["tcpdump"],
    ) {
        return;
    }
    let (c, s, ic, _) = pair("anslow", 16);
    let file = TempFile::new("slow");
    let reader = serve(&s, "10.77.16.2:7005", Some(16 * 1024), move |srv| {
        let (mut conn, _) = srv.accept().unwrap();
        let mut buf = [0u8; 4096];
        let mut total = 0;
        loop {
            match conn.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
            thread::sleep(Duration::from_millis(40));
        }
        total
    });
    let dump = Tcpdump::start(&c, &ic, &file);
    spawn_in_netns(&c, || {
        let mut conn = TcpStream::connect("10.77.16.2:7005").unwrap();
        conn.write_all(&vec![5u8; 160 * 1024]).unwrap();
    })
    .join()
    .unwrap();
    assert_eq!(reader.join().unwrap(), 160 * 1024);
    dump.stop();
    let (code, v) = analyze(&file, &[]);
    assert_eq!(code, 1);
    let f = finding(&v, "slow_reader");
    // The writer waits on the closed window for most of the transfer: time lost, judged by
    // the time it is (policy, issue 21): critical from 1 s lost in all, else by the longest
    // stall (a zero window of 200 ms or more: a warning).
    let lost = f["impact"]["time_lost_us"].as_u64().unwrap();
    let share = f["impact"]["time_lost_share"].as_f64().unwrap();
    assert!(share > 0.1, "{f:#}");
    let rule = if lost >= 1_000_000 {
        "time_lost"
    } else if f["impact"]["worst_stall_us"].as_u64().unwrap() >= 200_000 {
        "timeout_stall"
    } else {
        "some_time_lost"
    };
    assert_eq!(f["severity_rule"], rule, "{f:#}");
    assert_ne!(f["severity"], "info", "{f:#}");
    let d = &v["details"]["slow_readers"];
    assert_eq!(d["flows"], 1);
    assert!(d["zero_window_ads"].as_u64().unwrap() >= 2, "{d:#}");
    assert!(d["stall_max_us"].as_u64().unwrap() >= 20_000, "{d:#}");
    assert!(d["examples"][0]["description"]
        .as_str()
        .unwrap()
        .contains("10.77.16.2:7005"));
    // Nothing is lost with a slow reader.
    assert!(!pathologies(&v).contains(&"retransmit_timeout".to_string()));
}

/// A lossy bulk capture on a namespace's loopback: MTU 1500, offloads off, random drops in
/// the input hook (after the capture tap, so tcpdump sees every original).
fn lossy_capture(tag: &str, file: &TempFile, bytes: usize) {
    let ns = Netns::new(tag);
    ns.exec(
        "ip link set lo mtu 1500; ethtool -K lo tso off gso off gro off >/dev/null 2>&1 || true",
    );
    ns.exec(
        "nft add table inet tdocloss && nft add chain inet tdocloss in \"{ type filter hook input priority 0; }\" && nft add rule inet tdocloss in tcp dport 7006 numgen random mod 1000 \\< 5 drop",
    );
    let dump = Tcpdump::start(&ns, "lo", file);
    let sink = serve(&ns, "127.0.0.1:7006", None, move |lst| {
        let mut n = 0;
        for _ in 0..2 {
            let (mut c, _) = lst.accept().unwrap();
            let mut buf = vec![0u8; 1 << 16];
            loop {
                match c.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(k) => n += k,
                }
            }
        }
        n
    });
    let senders: Vec<_> = (0..2)
        .map(|_| {
            spawn_in_netns(&ns, move || {
                let mut c = TcpStream::connect("127.0.0.1:7006").unwrap();
                let chunk = vec![1u8; 1 << 16];
                for _ in 0..bytes / 2 / chunk.len() {
                    c.write_all(&chunk).unwrap();
                }
            })
        })
        .collect();
    for s in senders {
        s.join().unwrap();
    }
    assert_eq!(sink.join().unwrap(), bytes / 2 / (1 << 16) * (1 << 16) * 2);
    dump.stop();
}

#[test]
fn retransmission_count_agrees_with_tshark() {
    if !support::require_root_and_tools(
        "retransmission_count_agrees_with_tshark",
        &["tcpdump", "tshark"],
    ) {
        return;
    }
    let file = TempFile::new("tshark");
    lossy_capture("anrtx", &file, 48 << 20);
    let (_, v) = analyze(&file, &[]);
    let ours = v["totals"]["retransmissions"].as_u64().unwrap();
    let out = Command::new("tshark")
        .args([
            "-r",
            file.path(),
            "-Y",
            "tcp.analysis.retransmission",
            "-T",
            "fields",
            "-e",
            "frame.number",
        ])
        .output()
        .expect("run tshark");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs = String::from_utf8_lossy(&out.stdout).lines().count() as u64;
    assert!(
        theirs >= 20,
        "the capture must be lossy: tshark saw {theirs}"
    );
    let diff = ours.abs_diff(theirs) as f64 / theirs as f64;
    assert!(diff <= 0.01, "tcpdoctor {ours} vs tshark {theirs}");
}

/// Writes the first `keep` bytes of `src` to `dst`.
fn truncate_copy(src: &TempFile, dst: &TempFile, keep: usize) {
    let data = std::fs::read(&src.0).unwrap();
    std::fs::write(&dst.0, &data[..keep.min(data.len())]).unwrap();
}

#[test]
fn read_errors_keep_the_findings_so_far() {
    if !support::require_root_and_tools("read_errors_keep_the_findings_so_far", &["tcpdump"]) {
        return;
    }
    let file = TempFile::new("trunc-src");
    lossy_capture("antrunc", &file, 16 << 20);
    let size = std::fs::metadata(&file.0).unwrap().len() as usize;
    let (_, whole) = analyze(&file, &[]);
    assert!(whole["totals"]["retransmissions"].as_u64().unwrap() > 0);

    // Cut inside a record near the end: an error naming the offset, findings still printed.
    let cut = TempFile::new("trunc");
    truncate_copy(&file, &cut, size - 37);
    let (code, out, err) = support::run(&["analyze", cut.path(), "--json"]);
    assert_eq!(code, 2, "{err}");
    let v = support::json(&out, &err);
    assert_eq!(v["interrupted"], true);
    assert!(
        v["error"].as_str().unwrap().contains("offset"),
        "{}",
        v["error"]
    );
    assert!(err.lines().count() == 1 && err.contains("offset"), "{err}");
    assert!(!v["findings"].as_array().unwrap().is_empty());
    assert!(v["totals"]["segments"].as_u64().unwrap() > 1000);

    // Corrupt a record header in the middle: the same, with fewer segments.
    let bad = TempFile::new("corrupt");
    let mut data = std::fs::read(&file.0).unwrap();
    let mid = size / 2;
    // Find a record boundary by walking the pcap records (24-byte file header).
    let mut at = 24;
    while at + 16 < mid {
        let incl = u32::from_le_bytes(data[at + 8..at + 12].try_into().unwrap()) as usize;
        at += 16 + incl;
    }
    data[at + 8..at + 12].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
    std::fs::write(&bad.0, &data).unwrap();
    let (code, out, err) = support::run(&["analyze", bad.path()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        out.contains("Findings") && out.contains("Stopped early"),
        "{out}"
    );
    // The error names the byte offset of the broken record (or of its length field).
    let offset: usize = err
        .split("byte offset ")
        .nth(1)
        .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no byte offset in: {err}"));
    assert!(
        (at..at + 16).contains(&offset),
        "offset {offset}, record at {at}: {err}"
    );

    // A missing file is a one-line error and exit 2.
    let (code, _, err) = support::run(&["analyze", "/nonexistent/tdoc.pcap"]);
    assert_eq!(code, 2);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("/nonexistent/tdoc.pcap"), "{err}");
}

#[test]
fn flows_and_csv_list_each_incarnation() {
    if !support::require_root_and_tools("flows_and_csv_list_each_incarnation", &["tcpdump"]) {
        return;
    }
    let file = TempFile::new("flows");
    lossy_capture("anflows", &file, 4 << 20);
    let (_, v) = analyze(&file, &["--flows"]);
    let flows = v["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 2, "{flows:#?}");
    assert!(flows.iter().all(|f| f["server"] == "127.0.0.1:7006"));
    let (_, csv, err) = support::run(&["analyze", file.path(), "--csv"]);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 3, "{csv}{err}");
    assert!(lines[0].starts_with("id,client,server,incarnation"));
    assert_eq!(lines[1].split(',').count(), lines[0].split(',').count());
}

/// The workspace root (golden files are addressed relative to it).
fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// File 003's trace (a connect/send/close loop with SO_LINGER 0 on Linux loopback), segment
/// for segment: the old connection's reset close, then SYN -> stale ACK -> RST -> SYN 1 s
/// later. Written with the capture crate's pcap writer (payload bytes are zeros).
fn write_stale_ack_race_003(path: &std::path::Path) {
    use tcpdoctor_capture::write::{PcapWriter, WriteLink};
    use tcpdoctor_capture::{Segment, TcpFlags, TcpOptions};
    let lo: std::net::IpAddr = "127.0.0.1".parse().unwrap();
    const S: u8 = TcpFlags::SYN;
    const A: u8 = TcpFlags::ACK;
    const F: u8 = TcpFlags::FIN;
    const R: u8 = TcpFlags::RST;
    const P: u8 = TcpFlags::PSH;
    // (time of day us, client->server, flags, seq, ack, len, window, TSval, TSecr, syn options)
    let t = |h: u64, m: u64, s: u64, us: u64| ((h * 60 + m) * 60 + s) * 1_000_000 + us;
    type Row = (u64, bool, u8, u32, u32, u32, u16, u32, u32, bool);
    #[rustfmt::skip]
    let rows: &[Row] = &[
        (t(11, 57, 13, 188107), true, S, 2541101293, 0, 0, 65495, 953759375, 0, true),
        (t(11, 57, 13, 188109), false, S | A, 2413948679, 2541101294, 0, 65483, 953759375, 953759375, true),
        (t(11, 57, 13, 188116), true, A, 2541101294, 2413948680, 0, 512, 953759375, 953759375, false),
        (t(11, 57, 13, 188231), true, P | A, 2541101294, 2413948680, 4, 512, 953759375, 953759375, false),
        (t(11, 57, 13, 188235), false, A, 2413948680, 2541101298, 0, 512, 953759375, 953759375, false),
        (t(11, 57, 13, 188248), false, F | A, 2413948680, 2541101298, 0, 512, 953759375, 953759375, false),
        (t(11, 57, 13, 188347), true, A, 2541101298, 2413948681, 0, 512, 953759375, 953759375, false),
        (t(11, 57, 13, 188355), true, R | A, 2541101298, 2413948681, 0, 512, 953759375, 953759375, false),
        (t(11, 57, 14, 436259), true, S, 2560603644, 0, 0, 65495, 953760623, 0, true),
        (t(11, 57, 14, 436266), false, A, 2413948681, 2541101298, 0, 512, 953760623, 953759375, false),
        (t(11, 57, 14, 436271), true, R, 2541101298, 0, 0, 0, 0, 0, false),
        (t(11, 57, 15, 464613), true, S, 2560603644, 0, 0, 65495, 953761652, 0, true),
        (t(11, 57, 15, 464633), false, S | A, 2449519317, 2560603645, 0, 65483, 953761652, 953761652, true),
        (t(11, 57, 15, 464644), true, A, 2560603645, 2449519318, 0, 512, 953761652, 953761652, false),
        (t(11, 57, 15, 464677), true, P | A, 2560603645, 2449519318, 4, 512, 953761652, 953761652, false),
        (t(11, 57, 15, 464680), false, A, 2449519318, 2560603649, 0, 512, 953761652, 953761652, false),
        (t(11, 57, 15, 464730), false, F | A, 2449519318, 2560603649, 0, 512, 953761652, 953761652, false),
        (t(11, 57, 15, 464865), true, R | A, 2560603649, 2449519319, 0, 512, 953761652, 953761652, false),
    ];
    let day0_ns = 1_600_000_000u64 / 86_400 * 86_400 * 1_000_000_000;
    let mut w =
        PcapWriter::new(File::create(path).unwrap(), WriteLink::Ethernet, false, 0).unwrap();
    for (i, &(us, c2s, flags, seq, ack, len, win, tsv, tse, syn_opts)) in rows.iter().enumerate() {
        let (src_port, dst_port) = if c2s { (45150, 4242) } else { (4242, 45150) };
        let options = TcpOptions {
            mss: syn_opts.then_some(65495),
            window_scale: syn_opts.then_some(7),
            sack_permitted: syn_opts,
            timestamps: (flags & R == 0).then_some((tsv, tse)),
            ..TcpOptions::default()
        };
        w.write_segment(&Segment {
            frame: i as u64 + 1,
            ts_ns: day0_ns + us * 1_000,
            src: lo,
            dst: lo,
            src_port,
            dst_port,
            seq,
            ack,
            flags: TcpFlags(flags),
            window: win,
            payload_len: len,
            ip_id: 0,
            options,
        })
        .unwrap();
    }
    w.into_inner().unwrap();
}

/// The parts of a report a golden file pins: everything but the catalogue's prose (which
/// other commands share and may reword).
fn golden_view(mut v: Value) -> Value {
    if let Some(fs) = v["findings"].as_array_mut() {
        for f in fs {
            let o = f.as_object_mut().unwrap();
            o.remove("explanation");
            o.remove("remedies");
        }
    }
    // Where and when it ran, not what it found.
    if let Some(o) = v.as_object_mut() {
        for k in [
            "generated_at",
            "host_name",
            "kernel_release",
            "tcpdoctor_version",
            "tcpdoctor_commit",
        ] {
            o.remove(k);
        }
    }
    v
}

/// Golden captures in tests/data/analyze with the JSON tcpdoctor printed for them. Regenerate with
/// `TDOC_BLESS=1 cargo test -p tcpdoctor --test analyze golden` (see tests/data/analyze/README.md).
#[test]
fn golden_captures_match_expected_json() {
    let root = workspace();
    let data = root.join("tests/data/analyze");
    let bless = std::env::var_os("TDOC_BLESS").is_some();
    if bless {
        write_stale_ack_race_003(&data.join("stale-ack-race-003.pcap"));
        write_illumos_snoop(&data.join("illumos-tw-reset.snoop"));
    }
    for (name, ext, pathology) in [
        ("stale-ack-race-003", "pcap", Some("stale_ack_race")),
        ("illumos-tw-reset", "snoop", Some("time_wait_collision")),
        ("syn-drop", "pcap", Some("syn_retransmit")),
        ("tw-collision", "pcap", Some("time_wait_collision")),
        ("slow-reader-16k", "pcap", Some("slow_reader")),
        ("clean-keepalive", "pcap", None),
        ("time-server-300ms", "pcap", Some("server_response")),
        ("time-path-440ms", "pcap", Some("network_latency")),
        ("time-client-1300ms", "pcap", Some("client_delay")),
        ("incast-lab-6k", "pcap.gz", Some("incast")),
    ] {
        let rel = format!("tests/data/analyze/{name}.{ext}");
        let out = Command::new(support::bin())
            .current_dir(&root)
            .args(["analyze", &rel, "--json"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let got = golden_view(support::json(
            &stdout,
            &String::from_utf8_lossy(&out.stderr),
        ));
        let expected_path = data.join(format!("{name}.json"));
        if bless {
            std::fs::write(
                &expected_path,
                serde_json::to_string_pretty(&got).unwrap() + "\n",
            )
            .unwrap();
        }
        let expected: Value =
            serde_json::from_str(&std::fs::read_to_string(&expected_path).unwrap()).unwrap();
        assert_eq!(
            got,
            expected,
            "{name}: output differs from {}",
            expected_path.display()
        );
        let p = pathologies(&got);
        match pathology {
            Some(want) => {
                assert_eq!(p.first().map(String::as_str), Some(want), "{name}: {p:?}");
                // Exit 1 with a finding at warning or above; an info finding is healthy.
                let code = if got["verdict"] == "findings" { 1 } else { 0 };
                assert_eq!(out.status.code(), Some(code));
            }
            None => {
                assert!(p.is_empty(), "{name}: {p:?}");
                assert_eq!(out.status.code(), Some(0));
            }
        }
    }
}

/// Ctrl-C (SIGINT) while reading a pipe: the report of what was read is still printed,
/// marked interrupted.
#[test]
fn ctrl_c_prints_the_findings_so_far() {
    let path = workspace().join("tests/data/analyze/syn-drop.pcap");
    let bytes = std::fs::read(path).unwrap();
    let mut child = Command::new(support::bin())
        .args(["analyze", "-", "--json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&bytes).unwrap();
    thread::sleep(Duration::from_millis(300));
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    thread::sleep(Duration::from_millis(100));
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let v = support::json(
        &String::from_utf8_lossy(&out.stdout),
        &String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(v["interrupted"], true);
    assert_eq!(v["findings"][0]["pathology"], "syn_retransmit");
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn help_teaches_and_bad_flags_are_one_line_errors() {
    let (code, out, _) = support::run(&["analyze", "--help"]);
    assert_eq!(code, 0);
    for needle in [
        "Needs no root",
        "Output fields",
        "time_wait_collision",
        "Example:",
    ] {
        assert!(out.contains(needle), "--help lacks {needle}:\n{out}");
    }
    let (code, _, err) = support::run(&["analyze", "x.pcap", "--link-speed", "fast"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("--link-speed") && err.contains("fast"),
        "{err}"
    );
    let (code, _, err) = support::run(&["analyze", "x.pcap", "--port-range", "9-1"]);
    assert_eq!(code, 2);
    assert!(err.contains("--port-range"), "{err}");
}

/// Issue 9 defect 9: the same incast with the remedy applied (`rto_min 5ms` on the senders'
/// route): losses are still synchronized, so it is still incast, and the finding says the
/// short timers are in effect and what the losses still cost; the retransmissions of the
/// flows caught are its evidence, not findings of their own.
#[test]
fn incast_with_a_5ms_rto_min_is_still_incast_and_says_the_remedy_is_in_effect() {
    if !support::require_root_and_tools(
        "incast_with_a_5ms_rto_min_is_still_incast_and_says_the_remedy_is_in_effect",
        &["tcpdump"],
    ) {
        return;
    }
    let mut attempt = 0;
    let (code, v, worst) = loop {
        attempt += 1;
        let (code, v, worst) = incast_capture(Some("5ms"));
        if attempt == 3 || pathologies(&v).contains(&"incast".to_string()) {
            break (code, v, worst);
        }
        eprintln!("attempt {attempt}: no incast in the capture (worst round {worst:?}); again");
    };
    assert_eq!(code, 1);
    let f = finding(&v, "incast");
    let summary = f["summary"].as_str().unwrap();
    assert!(
        summary.contains("rto_min")
            && summary.contains("in effect")
            && summary.contains("still cost"),
        "worst round {worst:?}: {summary}"
    );
    // Short timers: no repair waited for the default 200 ms floor (a loaded machine's late
    // timers and RTO backoff may stretch a few of them past 90 ms).
    let stall = f["impact"]["worst_stall_us"].as_u64().unwrap();
    assert!(stall < 180_000, "{f:#}");
    assert!(
        f["impact"]["time_lost_share"].as_f64().unwrap() > 0.0,
        "{f:#}"
    );
    assert!(
        f["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "examples"
                && e["what"].as_str().unwrap().contains("not reported again")),
        "{f:#}"
    );
    // Nothing is reported twice: a retransmission finding, if any, is about flows the
    // incast episodes did not catch.
    let folded_flows = v["details"]["incast"].as_array().unwrap().len();
    assert!(folded_flows > 0);
    let p = pathologies(&v);
    assert_eq!(p[0], "incast", "{p:?}");
}

/// A tcpdump capture on `lo` of namespace `ns`, with the client side `f` run in it.
fn loopback_capture<T: Send + 'static>(
    ns: &Netns,
    file: &TempFile,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    ns.exec(
        "ip link set lo mtu 1500; ethtool -K lo tso off gso off gro off >/dev/null 2>&1 || true",
    );
    let dump = Tcpdump::start(ns, "lo", file);
    let out = spawn_in_netns(ns, f).join().unwrap();
    dump.stop();
    out
}

/// Sets SO_LINGER {on, 0}: close() sends a reset and leaves no TIME_WAIT.
fn linger_zero(fd: i32) {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &l as *const libc::linger as *const libc::c_void,
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    check(rc, "SO_LINGER");
}

/// Issue 9 defect 8: a connect/send/read/close loop with SO_LINGER 0 and TCP_NODELAY
/// reuses its ports at once (a reset close leaves no TIME_WAIT). When the server missed a
/// close reset (here nftables drops 5% of them: the state the kernel race of the
/// stale-ACK report left behind), the reused port's SYN is answered by a stale ACK. That is
/// the stale-ACK race, first; it is not port exhaustion, however fast the churn.
#[test]
fn linger_zero_churn_with_stale_acks_is_a_stale_ack_race_not_port_exhaustion() {
    if !support::require_root_and_tools(
        "linger_zero_churn_with_stale_acks_is_a_stale_ack_race_not_port_exhaustion",
        &["tcpdump"],
    ) {
        return;
    }
    let ns = Netns::new("anlinger");
    // A small range so that ports come round quickly (listener port 4242 is outside it).
    ns.sysctl("net.ipv4.ip_local_port_range", "40000 40199");
    ns.exec(
        "nft add table inet tdoclinger && nft add chain inet tdoclinger in \"{ type filter hook input priority 0; }\" && nft add rule inet tdoclinger in tcp dport 4242 tcp flags \\& \\(rst \\| ack\\) == \\(rst \\| ack\\) numgen random mod 100 \\< 5 drop",
    );
    let file = TempFile::new("linger");
    let server = serve(&ns, "127.0.0.1:4242", None, |lst| {
        let mut n = 0u32;
        loop {
            let (mut c, _) = lst.accept().unwrap();
            let mut b = [0u8; 4];
            let _ = c.read_exact(&mut b);
            if &b == b"stop" {
                break n;
            }
            n += 1;
        }
    });
    // Now and then a connect is refused (seen once in 9 full-suite runs, and once in 25 runs
    // of this test, where analyze named the stale-ACK race first and the refusal as a
    // connect failure): probably a port that came round within milliseconds, its SYN inside
    // the window of the server's old connection, which missed the reset. Counted.
    let (made, refused) = loopback_capture(&ns, &file, || {
        let deadline = Instant::now() + Duration::from_secs(30);
        let (mut made, mut refused) = (0u32, 0u32);
        while made < 3000 && Instant::now() < deadline {
            let mut c = match TcpStream::connect("127.0.0.1:4242") {
                Ok(c) => c,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    refused += 1;
                    continue;
                }
                Err(e) => panic!("connect: {e}"),
            };
            c.set_nodelay(true).unwrap();
            linger_zero(std::os::fd::AsRawFd::as_raw_fd(&c));
            c.write_all(b"abcd").unwrap();
            let mut b = [0u8; 4];
            let _ = c.read(&mut b);
            drop(c);
            made += 1;
        }
        // The same can refuse the last connect: try a few ports.
        let mut c = (0..5)
            .find_map(|_| TcpStream::connect("127.0.0.1:4242").ok())
            .expect("connect to send stop");
        linger_zero(std::os::fd::AsRawFd::as_raw_fd(&c));
        c.write_all(b"stop").unwrap();
        (made, refused)
    });
    server.join().unwrap();
    assert!(made >= 1000, "only {made} connections in 30 s");
    let (code, v) = analyze(&file, &[]);
    assert_eq!(code, 1);
    let p = pathologies(&v);
    if refused == 0 {
        assert_eq!(
            p.first().map(String::as_str),
            Some("stale_ack_race"),
            "{p:?}"
        );
    } else {
        // The refused connects are a collision with the server's old connection, or
        // failures of their own; the stale-ACK race stays named.
        eprintln!("{refused} connect(s) refused: {p:?}");
        assert!(p.contains(&"stale_ack_race".to_string()), "{p:?}");
        assert!(
            ["stale_ack_race", "time_wait_collision", "connect_failure"].contains(&p[0].as_str()),
            "{p:?}"
        );
    }
    assert!(!p.contains(&"port_exhaustion".to_string()), "{p:?}");
    let d = &v["details"]["stale_ack_races"];
    assert!(d["count"].as_u64().unwrap() >= 5, "{d:#}");
    assert_eq!(d["count"], d["answered_by_stale_ack"]);
    let dest = &v["details"]["destinations"][0];
    assert_eq!(dest["client_closed_first"], 0, "{dest:#}");
    assert!(dest["reset_closes"].as_u64().unwrap() >= 1000, "{dest:#}");
}

/// Issue 9 defect 7: the rate of a client that opens connections toward one destination and
/// closes them first is taken over the real span, without --port-range. Issue "Verdicts you
/// can trust": a rate over the default budget (28,232 ports / 60 s = 471/s) is port
/// exhaustion only with evidence that the ports ran short; 300 connections on ports the
/// kernel hands out from one parity of the default range show none: an exposure (warning),
/// with the time the range would last at that rate, once seen over a second (issue 21: a
/// shorter burst is context). (The lab's port-exhaustion capture, 200
/// connections filling its 200-port range, both parities, stays critical.)
#[test]
fn a_client_faster_than_the_default_port_budget_without_ports_running_short_is_an_exposure() {
    if !support::require_root_and_tools(
        "a_client_faster_than_the_default_port_budget_without_ports_running_short_is_an_exposure",
        &["tcpdump"],
    ) {
        return;
    }
    let (c, s, ic, _) = pair("anport", 17);
    let file = TempFile::new("ports");
    let server = serve(&s, "10.77.17.2:7007", None, |lst| {
        for _ in 0..300 {
            let (mut conn, _) = lst.accept().unwrap();
            let mut b = [0u8; 16];
            // The client closes first: read to its FIN, then close.
            while conn.read(&mut b).map(|n| n > 0).unwrap_or(false) {}
        }
    });
    let dump = Tcpdump::start(&c, &ic, &file);
    let took = spawn_in_netns(&c, || {
        let t = Instant::now();
        for _ in 0..300 {
            let mut conn = TcpStream::connect("10.77.17.2:7007").unwrap();
            conn.write_all(b"x").unwrap();
            conn.shutdown(std::net::Shutdown::Write).unwrap();
            let mut b = [0u8; 1];
            let _ = conn.read(&mut b);
        }
        t.elapsed()
    })
    .join()
    .unwrap();
    server.join().unwrap();
    dump.stop();
    let (_, v) = analyze(&file, &[]);
    let d = &v["details"]["destinations"][0];
    assert_eq!(d["client_closed_first"], 300, "{d:#}");
    assert_eq!(d["ran_short"], false, "{d:#}");
    assert_eq!(d["port_range_source"], "linux_default");
    // 300 connections in `took`: the capture's rate agrees with the loop's.
    let rate = d["client_closed_first_per_s"].as_f64().unwrap();
    let loop_rate = 300.0 / took.as_secs_f64();
    assert!(rate >= loop_rate * 0.8, "{rate} vs {loop_rate}: {d:#}");
    let span_us = d["span_us"].as_u64().unwrap();
    if loop_rate > 600.0 && span_us < 1_000_000 {
        // Issue 21: a rate per second seen over less than a second is a burst: context.
        let f = finding(&v, "port_exhaustion");
        assert_eq!(f["severity"], "info", "{f:#}");
        assert!(f["summary"].as_str().unwrap().contains("a burst"), "{f:#}");
    } else if loop_rate > 600.0 {
        let f = finding(&v, "port_exhaustion");
        // Named as an exposure (one level below exhaustion): the rate would use the range up.
        assert_eq!(f["severity"], "warning", "{f:#}");
        assert_eq!(f["severity_rule"], "budget_exhausted");
        assert_eq!(f["impact"]["exposure"], true, "{f:#}");
        assert!(
            f["summary"]
                .as_str()
                .unwrap()
                .contains("no sign in the capture that the ports ran short"),
            "{f:#}"
        );
    } else {
        eprintln!("the machine managed only {loop_rate:.0} connections/s: not above the budget");
    }
}

/// Issue 9 defect 13: `--idle-timeout` shorter than the SYN ladder keeps the SYN findings
/// (a critical capture used to become healthy).
#[test]
fn an_idle_timeout_shorter_than_the_syn_ladder_keeps_syn_findings() {
    let path = workspace().join("tests/data/analyze/syn-drop.pcap");
    let p = path.to_str().unwrap();
    let (code, out, err) = support::run(&["analyze", p, "--json", "--idle-timeout", "500ms"]);
    assert_eq!(code, 1, "{err}");
    let v = support::json(&out, &err);
    let f = finding(&v, "syn_retransmit");
    assert_eq!(f["severity"], "critical");
    assert_eq!(v["details"]["syn_retransmits"]["connections"], 2);
    assert_eq!(v["totals"]["connections"], 2);
}

/// Issue 9 defect 11: SYNs from 300,000 distinct sources, none answered (a SYN flood
/// capture built here), are named unanswered_syn; they used to make a healthy verdict.
#[test]
fn unanswered_syns_from_distinct_sources_are_named_not_healthy() {
    use tcpdoctor_capture::write::{PcapWriter, WriteLink};
    use tcpdoctor_capture::{Segment, TcpFlags, TcpOptions};
    let file = TempFile::new("synflood");
    let mut w = PcapWriter::new(
        std::io::BufWriter::new(File::create(&file.0).unwrap()),
        WriteLink::RawIp,
        false,
        0,
    )
    .unwrap();
    let t0 = 1_700_000_000_000_000_000u64;
    const N: u32 = 300_000;
    for i in 0..N {
        // 20,000 SYNs a second, each from its own address, none answered.
        w.write_segment(&Segment {
            frame: 0,
            ts_ns: t0 + u64::from(i) * 50_000,
            src: std::net::IpAddr::V4(std::net::Ipv4Addr::from(0x0b00_0000 + i)),
            dst: "10.9.9.9".parse().unwrap(),
            src_port: 1024 + (i % 60_000) as u16,
            dst_port: 80,
            seq: i.wrapping_mul(2_654_435_761),
            ack: 0,
            flags: TcpFlags(TcpFlags::SYN),
            window: 64240,
            payload_len: 0,
            ip_id: 0,
            options: TcpOptions::default(),
        })
        .unwrap();
    }
    w.into_inner().unwrap();
    let (code, v) = analyze(&file, &[]);
    assert_eq!(code, 1);
    let f = finding(&v, "unanswered_syn");
    assert_eq!(f["severity"], "critical");
    assert!(
        f["summary"].as_str().unwrap().contains("SYN flood"),
        "{f:#}"
    );
    let u = &v["details"]["unanswered_syns"];
    let failed = u["connections"].as_u64().unwrap();
    let waiting = u["waiting_at_end"].as_u64().unwrap();
    assert_eq!(failed + waiting, u64::from(N), "{u:#}");
    // Those of the last ~2.1 s were still within their first rung at the end.
    assert!(failed >= 250_000, "{u:#}");
    assert_eq!(u["summarised_early"], 0, "{u:#}");
    // Half-open state ends with the ladder (1 s rung, its lateness, 1 s slack): about
    // 2.1 s of SYNs are held at once, not all of them; and at most 4,096 more held on for a
    // resend on the classic 3 s ladder, which stand in line with SYNs up to 0.2 s younger
    // (measured: 49,176).
    let peak = v["totals"]["peak_tracked_connections"].as_u64().unwrap();
    assert!(peak <= 45_000 + 4_096 + 4_000, "{peak}");
}

/// One TCP segment for a built capture.
#[allow(clippy::too_many_arguments)]
fn seg(
    t_us: u64,
    c2s: bool,
    port: u16,
    flags: u8,
    seq: u32,
    ack: u32,
    len: u32,
) -> tcpdoctor_capture::Segment {
    let (c, s): (std::net::IpAddr, std::net::IpAddr) =
        ("10.1.1.1".parse().unwrap(), "10.1.1.2".parse().unwrap());
    let (src, dst, sp, dp) = if c2s {
        (c, s, port, 8080)
    } else {
        (s, c, 8080, port)
    };
    let syn = flags & tcpdoctor_capture::TcpFlags::SYN != 0;
    tcpdoctor_capture::Segment {
        frame: 0,
        ts_ns: 1_407_000_000_000_000_000 + t_us * 1_000,
        src,
        dst,
        src_port: sp,
        dst_port: dp,
        seq,
        ack,
        flags: tcpdoctor_capture::TcpFlags(flags),
        window: 49640,
        payload_len: len,
        ip_id: 0,
        options: tcpdoctor_capture::TcpOptions {
            mss: syn.then_some(1460),
            ..Default::default()
        },
    }
}

/// A request/response connection on `port` from `t` (us): handshake, 100 bytes up, 200
/// bytes down, the server closes first (so it holds TIME_WAIT, as on illumos app servers).
/// Returns the client's and server's next sequence numbers.
fn exchange(
    out: &mut Vec<tcpdoctor_capture::Segment>,
    t: u64,
    port: u16,
    ci: u32,
    si: u32,
) -> (u32, u32) {
    use tcpdoctor_capture::TcpFlags as T;
    let (a, s, f, p) = (T::ACK, T::SYN, T::FIN, T::PSH);
    let (c1, s1) = (ci.wrapping_add(1), si.wrapping_add(1));
    out.push(seg(t + 100, false, port, s | a, si, c1, 0));
    out.push(seg(t + 200, true, port, a, c1, s1, 0));
    out.push(seg(t + 300, true, port, p | a, c1, s1, 100));
    let c2 = c1.wrapping_add(100);
    out.push(seg(t + 2_000, false, port, p | a, s1, c2, 200));
    let s2 = s1.wrapping_add(200);
    out.push(seg(t + 2_100, false, port, f | a, s2, c2, 0));
    out.push(seg(t + 2_200, true, port, a, c2, s2.wrapping_add(1), 0));
    out.push(seg(t + 2_300, true, port, f | a, c2, s2.wrapping_add(1), 0));
    out.push(seg(
        t + 2_400,
        false,
        port,
        a,
        s2.wrapping_add(1),
        c2.wrapping_add(1),
        0,
    ));
    (c2.wrapping_add(1), s2.wrapping_add(1))
}

/// Issue 9 defect 14: the illumos form of the TIME_WAIT collision, in a snoop capture built
/// here ([`write_illumos_snoop`]). Every count is
/// exact: the collisions (none filed as refused), the answers (resets, not ACKs), the SYN
/// retransmissions, no data or FIN of the new incarnations counted as retransmissions, and
/// delays measured from the answer, never absolute times.
/// Writes the illumos form of the TIME_WAIT collision as a snoop file (what
/// `illumos_time_wait_collision_answered_by_resets_is_counted_exactly_in_snoop` and the
/// golden `illumos-tw-reset.snoop` hold). The server closed first and holds TIME_WAIT; a new
/// SYN on the same 4-tuple whose ISN is below the old sequence numbers is taken for an old
/// duplicate and answered by a reset that does not acknowledge it; the client ignores the
/// reset and resends the SYN after 1.1 s (once, 3.4 s after the first SYN, after a second
/// reset). Ports: 50003 collides at the start of the capture (its old connection unseen);
/// 50001 and 50004 (a reset with an ACK of the old connection) once; 50002 twice; 50006 is
/// reused with a higher ISN and accepted at once; 50005 is used once.
fn write_illumos_snoop(path: &std::path::Path) {
    use tcpdoctor_capture::write::SnoopWriter;
    use tcpdoctor_capture::TcpFlags as T;
    let (s, r, a) = (T::SYN, T::RST, T::ACK);
    let mut v = Vec::new();
    // Port 50003: the capture begins with a colliding SYN (its old connection unseen).
    v.push(seg(0, true, 50003, s, 100, 0, 0));
    v.push(seg(80, false, 50003, r, 3_000_000_000, 0, 0));
    v.push(seg(1_100_000, true, 50003, s, 100, 0, 0));
    exchange(&mut v, 1_100_000, 50003, 100, 7_000);
    // Ports 50001, 50002, 50004, 50005, 50006: a first connection each.
    let mut last = std::collections::HashMap::new();
    for (k, port) in [50001u16, 50002, 50004, 50005, 50006]
        .into_iter()
        .enumerate()
    {
        let t = 2_000_000 + k as u64 * 10_000;
        let ci = 4_000_000_000 - k as u32 * 1_000;
        v.push(seg(t, true, port, s, ci, 0, 0));
        last.insert(
            port,
            exchange(&mut v, t, port, ci, 1_000_000 * (k as u32 + 1)),
        );
    }
    // 5 s later the ports come round again with wrapped (low) ISNs.
    let t = 7_000_000;
    // 50001: reset without ACK, SYN resent after 1.1 s, connected.
    v.push(seg(t, true, 50001, s, 5_000, 0, 0));
    v.push(seg(t + 90, false, 50001, r, last[&50001].1, 0, 0));
    v.push(seg(t + 1_100_000, true, 50001, s, 5_000, 0, 0));
    exchange(&mut v, t + 1_100_000, 50001, 5_000, 70_000);
    // 50002: reset, resent at 1.1 s, reset again, resent at 3.4 s, connected.
    let t2 = t + 20_000;
    v.push(seg(t2, true, 50002, s, 6_000, 0, 0));
    v.push(seg(t2 + 90, false, 50002, r, last[&50002].1, 0, 0));
    v.push(seg(t2 + 1_100_000, true, 50002, s, 6_000, 0, 0));
    v.push(seg(t2 + 1_100_090, false, 50002, r, last[&50002].1, 0, 0));
    v.push(seg(t2 + 3_400_000, true, 50002, s, 6_000, 0, 0));
    exchange(&mut v, t2 + 3_400_000, 50002, 6_000, 80_000);
    // 50004: a reset with an ACK of the old connection (not of this SYN): also ignored.
    let t4 = t + 40_000;
    v.push(seg(t4, true, 50004, s, 7_000, 0, 0));
    v.push(seg(
        t4 + 90,
        false,
        50004,
        r | a,
        last[&50004].1,
        last[&50004].0,
        0,
    ));
    v.push(seg(t4 + 1_100_000, true, 50004, s, 7_000, 0, 0));
    exchange(&mut v, t4 + 1_100_000, 50004, 7_000, 90_000);
    // 50006: reused with an ISN above the old sequence numbers: accepted at once.
    let t6 = t + 60_000;
    let isn6 = last[&50006].0.wrapping_add(100_000);
    v.push(seg(t6, true, 50006, s, isn6, 0, 0));
    exchange(&mut v, t6, 50006, isn6, 95_000);
    v.sort_by_key(|x| x.ts_ns);
    let mut w = SnoopWriter::new(std::io::BufWriter::new(File::create(path).unwrap())).unwrap();
    for x in &v {
        w.write_segment(x).unwrap();
    }
    w.into_inner().unwrap();
}

#[test]
fn illumos_time_wait_collision_answered_by_resets_is_counted_exactly_in_snoop() {
    let file = TempFile::new("illumos");
    write_illumos_snoop(&file.0);

    let (code, out, err) = support::run(&["analyze", file.path(), "--json"]);
    assert_eq!(code, 1, "{err}");
    let j = support::json(&out, &err);
    assert_eq!(
        j["capture"]["format"]["kind"], "snoop",
        "{:#}",
        j["capture"]
    );
    let p = pathologies(&j);
    assert_eq!(p, ["time_wait_collision"], "{:#}", j["findings"]);
    let d = &j["details"]["time_wait_collisions"];
    assert_eq!(d["count"], 4, "{d:#}");
    assert_eq!(d["answered_by_reset"], 4);
    assert_eq!(d["answered_by_stale_ack"], 0);
    assert_eq!(d["failed"], 0);
    assert_eq!(j["details"]["refused_connects"]["count"], 0);
    assert_eq!(j["details"]["stale_ack_races"]["count"], 0);
    // Delays: from the reset to the resent SYN (1.1 s); connect up to 3.4 s.
    let resend = d["max_resend_delay_us"].as_u64().unwrap();
    assert!((1_099_000..1_101_000).contains(&resend), "{d:#}");
    let connect = d["max_connect_delay_us"].as_u64().unwrap();
    assert!((3_400_000..3_401_000).contains(&connect), "{d:#}");
    // Five SYNs were resent and nothing else: no data or FIN of a new incarnation counted.
    let t = &j["totals"];
    assert_eq!(t["retransmissions_syn"], 5, "{t:#}");
    assert_eq!(t["retransmissions"], 5, "{t:#}");
    assert_eq!(t["connection_attempts"], 10, "{t:#}");
    assert_eq!(t["reused_ports"], 4, "{t:#}");
    let f = finding(&j, "time_wait_collision");
    let summary = f["summary"].as_str().unwrap();
    assert!(!summary.contains("answered by an ACK"), "{summary}");
    assert!(summary.contains("4 answered by a reset"), "{summary}");
    assert!(summary.contains("3.400 s"), "{summary}");
    assert_eq!(f["severity"], "critical");
    assert_eq!(f["severity_rule"], "long_stall");
    for e in f["evidence"].as_array().unwrap() {
        if let Some(d) = e["description"].as_str() {
            assert!(!d.contains("answered by an ACK"), "{d}");
        }
    }
}

/// Classic little-endian pcap bytes as (file header, records with their 16-byte headers).
fn pcap_records(data: &[u8]) -> (&[u8], Vec<&[u8]>) {
    assert_eq!(
        &data[..4],
        &[0xd4, 0xc3, 0xb2, 0xa1],
        "a little-endian pcap"
    );
    let mut recs = Vec::new();
    let mut at = 24;
    while at + 16 <= data.len() {
        let incl = u32::from_le_bytes(data[at + 8..at + 12].try_into().unwrap()) as usize;
        recs.push(&data[at..at + 16 + incl]);
        at += 16 + incl;
    }
    assert_eq!(at, data.len(), "whole records");
    (&data[..24], recs)
}

fn write_pcap(path: &std::path::Path, header: &[u8], recs: &[&[u8]]) {
    let mut out = header.to_vec();
    for r in recs {
        out.extend_from_slice(r);
    }
    std::fs::write(path, out).unwrap();
}

/// Runs `analyze --json` on several files; returns (exit code, report, stderr).
fn analyze_files(files: &[&str]) -> (i32, Value, String) {
    let mut args = vec!["analyze"];
    args.extend_from_slice(files);
    args.push("--json");
    let (code, out, err) = support::run(&args);
    (code, support::json(&out, &err), err)
}

/// What the analysis found, without how the input was stored (names, compression, bytes).
fn analysis_view(v: &Value) -> Value {
    let mut v = golden_view(v.clone());
    v.as_object_mut().unwrap().remove("capture");
    v
}

/// A tcpdump capture of one connection split in two files (first half, second half) gives
/// the findings, frame numbers and counts of the whole capture, in either file order; every
/// other packet in each file is put back in time order, the same report as the file
/// `mergecap` makes of the parts.
#[test]
fn a_capture_split_in_two_files_gives_the_findings_of_the_whole() {
    for name in ["slow-reader-16k", "syn-drop"] {
        let whole_path = workspace().join(format!("tests/data/analyze/{name}.pcap"));
        let data = std::fs::read(&whole_path).unwrap();
        let (header, recs) = pcap_records(&data);
        let (code, whole, err) = analyze_files(&[whole_path.to_str().unwrap()]);
        assert_eq!(code, 1, "{name}: {err}");
        assert!(!pathologies(&whole).is_empty());
        let ts = |r: &[u8]| (r[0..4].to_vec(), r[4..8].to_vec());
        // The halves meet where timestamps differ, so either file order is the same merge.
        let mut mid = recs.len() / 2;
        while ts(recs[mid - 1]) == ts(recs[mid]) {
            mid += 1;
        }
        let (a, b) = (
            TempFile::new(&format!("{name}-a")),
            TempFile::new(&format!("{name}-b")),
        );
        write_pcap(&a.0, header, &recs[..mid]);
        write_pcap(&b.0, header, &recs[mid..]);
        for order in [[a.path(), b.path()], [b.path(), a.path()]] {
            let (code, split, err) = analyze_files(&order);
            assert_eq!(code, 1, "{name}: {err}");
            assert_eq!(
                analysis_view(&split),
                analysis_view(&whole),
                "{name} {order:?}"
            );
            assert_eq!(split["capture"]["packets"], whole["capture"]["packets"]);
            assert_eq!(split["capture"]["inputs"].as_array().unwrap().len(), 2);
        }
        // Interleaved: odd packets in one file, even in the other.
        let odd: Vec<&[u8]> = recs.iter().step_by(2).copied().collect();
        let even: Vec<&[u8]> = recs.iter().skip(1).step_by(2).copied().collect();
        write_pcap(&a.0, header, &odd);
        write_pcap(&b.0, header, &even);
        let (code, split, err) = analyze_files(&[a.path(), b.path()]);
        assert_eq!(code, 1, "{name}: {err}");
        // A merge puts packets in time order, ties to the file named last: only a capture
        // whose timestamps always move forward comes out of it exactly as it was (tcpdump
        // stamps in microseconds: on loopback several packets share one, and mergecap
        // orders those by file too).
        let key = |r: &[u8]| {
            let w = |i: usize| u32::from_le_bytes(r[i..i + 4].try_into().unwrap());
            (w(0), w(4))
        };
        if recs.windows(2).all(|p| key(p[0]) < key(p[1])) {
            assert_eq!(
                analysis_view(&split),
                analysis_view(&whole),
                "{name} interleaved"
            );
        } else {
            assert_eq!(
                pathologies(&split),
                pathologies(&whole),
                "{name} interleaved"
            );
        }
        // Frame numbers are those of the merged capture, as mergecap writes it.
        if Command::new("mergecap").arg("-h").output().is_ok() {
            let merged = TempFile::new(&format!("{name}-merged"));
            let st = Command::new("mergecap")
                .args(["-F", "pcap", "-w", merged.path(), a.path(), b.path()])
                .status()
                .unwrap();
            assert!(st.success());
            let (_, m, _) = analyze_files(&[merged.path()]);
            assert_eq!(
                analysis_view(&m),
                analysis_view(&split),
                "{name} vs mergecap"
            );
        } else {
            eprintln!("mergecap not installed: comparison with its output skipped");
        }
    }
}

/// `path` compressed with `tool` (`xz` or `zstd`): by the command-line tool when installed,
/// else by the same library tcpdoctor reads it with.
fn compress(tool: &str, path: &std::path::Path, out: &std::path::Path) {
    let cli = Command::new(tool)
        .args(["-c", "-q"])
        .arg(path)
        .stdout(File::create(out).unwrap())
        .status();
    if matches!(cli, Ok(s) if s.success()) {
        return;
    }
    eprintln!("{tool} command not available: compressing with the library");
    let data = std::fs::read(path).unwrap();
    let bytes = match tool {
        "xz" => {
            let mut e = liblzma::write::XzEncoder::new(Vec::new(), 6);
            e.write_all(&data).unwrap();
            e.finish().unwrap()
        }
        _ => zstd::encode_all(&data[..], 3).unwrap(),
    };
    std::fs::write(out, bytes).unwrap();
}

/// xz and zstd copies of a capture are recognised by their first bytes (whatever the file
/// is called) and give the report of the plain file; gzip as before.
#[test]
fn xz_and_zstd_captures_give_the_report_of_the_plain_file() {
    for name in ["slow-reader-16k", "tw-collision"] {
        let plain = workspace().join(format!("tests/data/analyze/{name}.pcap"));
        let (want_code, want, err) = analyze_files(&[plain.to_str().unwrap()]);
        assert!(want_code == 0 || want_code == 1, "{err}");
        for (tool, kind) in [("xz", "xz"), ("zstd", "zstd"), ("gzip", "gzip")] {
            // No telling extension: detection is by magic bytes.
            let packed = TempFile::new(&format!("{name}-{tool}"));
            compress(tool, &plain, &packed.0);
            let (code, got, err) = analyze_files(&[packed.path()]);
            assert_eq!(code, want_code, "{tool}: {err}");
            assert_eq!(analysis_view(&got), analysis_view(&want), "{name} {tool}");
            let (mut c_got, mut c_want) = (got["capture"].clone(), want["capture"].clone());
            assert_eq!(c_got["compression"], kind);
            for c in [&mut c_got, &mut c_want] {
                for k in ["name", "compression", "gzip"] {
                    c.as_object_mut().unwrap().remove(k);
                }
            }
            assert_eq!(c_got, c_want, "{name} {tool}: capture counts");
        }
    }
}

/// A capture of `conns` connections whose first SYN went unanswered: each SYN is resent
/// 1 s later and answered, then the connection closes. Connections start 1 ms apart.
fn write_syn_ladders(path: &std::path::Path, conns: u32) {
    use tcpdoctor_capture::write::{PcapWriter, WriteLink};
    use tcpdoctor_capture::{Segment, TcpFlags, TcpOptions};
    let (c, s): (std::net::IpAddr, std::net::IpAddr) =
        ("10.77.90.1".parse().unwrap(), "10.77.90.2".parse().unwrap());
    let mut frames = Vec::new();
    for i in 0..conns {
        let t0 = 1_700_000_000_000_000_000u64 + u64::from(i) * 1_000_000;
        let port = 33000 + (i % 20000) as u16;
        let (isn, sisn) = (1000 + i * 7919, 5000 + i * 104729);
        let syn_opts = TcpOptions {
            mss: Some(1460),
            window_scale: Some(7),
            sack_permitted: true,
            ..TcpOptions::default()
        };
        let mk = |ts_ns, c2s: bool, flags, seq, ack, opts| {
            let (src, dst, sp, dp) = if c2s {
                (c, s, port, 7100)
            } else {
                (s, c, 7100, port)
            };
            Segment {
                frame: 0,
                ts_ns,
                src,
                dst,
                src_port: sp,
                dst_port: dp,
                seq,
                ack,
                flags: TcpFlags(flags),
                window: 512,
                payload_len: 0,
                ip_id: 0,
                options: opts,
            }
        };
        const S: u8 = TcpFlags::SYN;
        const A: u8 = TcpFlags::ACK;
        const F: u8 = TcpFlags::FIN;
        let none = TcpOptions::default();
        frames.push(mk(t0, true, S, isn, 0, syn_opts));
        frames.push(mk(t0 + 1_000_000_000, true, S, isn, 0, syn_opts));
        frames.push(mk(
            t0 + 1_000_050_000,
            false,
            S | A,
            sisn,
            isn + 1,
            syn_opts,
        ));
        frames.push(mk(t0 + 1_000_100_000, true, A, isn + 1, sisn + 1, none));
        frames.push(mk(t0 + 1_002_000_000, true, F | A, isn + 1, sisn + 1, none));
        frames.push(mk(
            t0 + 1_002_050_000,
            false,
            F | A,
            sisn + 1,
            isn + 2,
            none,
        ));
        frames.push(mk(t0 + 1_002_100_000, true, A, isn + 2, sisn + 2, none));
    }
    frames.sort_by_key(|f| f.ts_ns);
    let mut w = PcapWriter::new(
        std::io::BufWriter::new(File::create(path).unwrap()),
        WriteLink::Ethernet,
        false,
        0,
    )
    .unwrap();
    for f in &frames {
        w.write_segment(f).unwrap();
    }
    w.into_inner().unwrap();
}

/// A .zst capture cut short: one line on stderr naming the file and the byte offset where
/// reading stopped, exit 2, and the report of the packets before the cut (fewer than the
/// whole, more than none), marked interrupted.
#[test]
fn a_truncated_zstd_capture_is_a_one_line_error_with_partial_results() {
    let plain = TempFile::new("ladders");
    write_syn_ladders(&plain.0, 6000);
    let packed = TempFile::new("ladders-zst");
    compress("zstd", &plain.0, &packed.0);
    let (code, whole, err) = analyze_files(&[packed.path()]);
    assert_eq!(code, 1, "{err}");
    let all = whole["totals"]["retransmissions_syn"].as_u64().unwrap();
    assert_eq!(all, 6000, "{:#}", whole["totals"]);
    let data = std::fs::read(&packed.0).unwrap();
    let cut = TempFile::new("ladders-cut");
    std::fs::write(&cut.0, &data[..data.len() / 2]).unwrap();
    let (code, v, err) = analyze_files(&[cut.path()]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(
        err.contains(cut.path()) && err.contains("byte offset"),
        "{err}"
    );
    assert_eq!(v["interrupted"], true);
    assert!(v["error"].as_str().unwrap().contains(cut.path()));
    let some = v["totals"]["retransmissions_syn"].as_u64().unwrap();
    assert!(
        some > 0 && some < all,
        "{some} of {all} SYN resends before the cut"
    );
    assert!(pathologies(&v).contains(&"syn_retransmit".to_string()));
    // The same cut inside a merge: the run ends there, with what came before.
    let other = workspace().join("tests/data/analyze/syn-drop.pcap");
    let (code, m, err) = analyze_files(&[other.to_str().unwrap(), cut.path()]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains(cut.path()), "{err}");
    assert!(m["totals"]["retransmissions_syn"].as_u64().unwrap() > 0);
}

/// A file holding one capture twice, the second copy joined after the first (what
/// `mergecap -a` of a capture with itself writes; a public capture, ftp-crack.pcap, is such a
/// file): read as one capture in file order, the copy's packets were 655 reused ports, 94
/// resent SYNs and a CRITICAL port exhaustion. Reading stops where time goes back a second or
/// more, with a one-line error naming the frame, its offset and how to sort the file; the
/// packets before it are analysed, each connection once.
#[test]
fn a_capture_joined_to_itself_stops_where_time_goes_back() {
    use tcpdoctor_capture::write::{PcapWriter, WriteLink};
    use tcpdoctor_capture::TcpFlags as T;
    let mut segs = Vec::new();
    for i in 0..20u16 {
        let t = u64::from(i) * 100_000;
        let (ci, si) = (u32::from(i) * 1_000_000, 7 + u32::from(i) * 3_000_000);
        segs.push(seg(t, true, 40_000 + i, T::SYN, ci, 0, 0));
        exchange(&mut segs, t, 40_000 + i, ci, si);
    }
    let file = TempFile::new("joined");
    let mut w = PcapWriter::new(
        File::create(&file.0).unwrap(),
        WriteLink::Ethernet,
        false,
        0,
    )
    .unwrap();
    for s in segs.iter().chain(segs.iter()) {
        w.write_segment(s).unwrap();
    }
    w.into_inner().unwrap();
    let (code, out, err) = support::run(&["analyze", file.path(), "--json"]);
    assert_eq!(code, 2, "{err}");
    let line = err.trim();
    assert!(!line.contains('\n'), "{err}");
    // The last packet of the first copy is at 1.9024 s, the copy starts again at 0.
    assert!(
        line.contains("frame 181 is 1.902 s older than a packet before it")
            && line.contains("reordercap")
            && line.contains("byte offset "),
        "{line}"
    );
    let v = support::json(&out, &err);
    assert_eq!(v["totals"]["connections"], 20, "{:#}", v["totals"]);
    assert_eq!(v["totals"]["reused_ports"], 0, "{:#}", v["totals"]);
    assert_eq!(v["totals"]["retransmissions"], 0, "{:#}", v["totals"]);
    assert!(v["error"].as_str().unwrap().contains("frame 181"), "{v:#}");
    assert_eq!(v["interrupted"], true);
    assert_ne!(v["verdict"], "healthy");
}
