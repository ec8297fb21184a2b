//! [`Lab`]: a set of network namespaces with veths, a bridge, qdiscs, nftables tables, sysctls
//! and routes, built with `ip`, `tc`, `nft` and `ethtool`, and torn down when dropped (on
//! success, error, panic, and after Ctrl-C once the scenario has polled its stop flag).
//!
//! Veth pairs are created directly inside the namespaces (`ip link add A netns X type veth peer
//! name B netns Y`), so the root namespace never holds a lab interface. Deleting a namespace
//! deletes its interfaces, qdiscs, nftables tables, routes and sysctls with it.

use crate::exec::{self, run};
use crate::{naming, Error, Result};

/// A running lab. Owns its namespaces; [`Drop`] removes them and any process left inside.
#[derive(Debug)]
pub struct Lab {
    pid: u32,
    namespaces: Vec<String>,
    rps_mask: String,
}

impl Lab {
    /// An empty lab for this process. Fails with [`Error::NotRoot`] without root.
    pub fn new() -> Result<Lab> {
        crate::require_root()?;
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .min(32);
        Ok(Lab {
            pid: std::process::id(),
            namespaces: Vec::new(),
            rps_mask: format!("{:x}", (1u64 << cpus) - 1),
        })
    }

    /// The run id (this process's pid) that every namespace name carries.
    pub fn run_id(&self) -> u32 {
        self.pid
    }

    /// Namespaces created so far.
    pub fn namespaces(&self) -> &[String] {
        &self.namespaces
    }

    /// Creates namespace `tdoc-lab-<pid>-<role>` with its loopback up; returns its name.
    pub fn add_ns(&mut self, role: &str) -> Result<String> {
        let ns = naming::netns(self.pid, role);
        let step = format!("create namespace {ns}");
        run(&step, "ip", &["netns", "add", &ns])?;
        self.namespaces.push(ns.clone());
        run(&step, "ip", &["-n", &ns, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// A veth pair `if_a` (in `ns_a`) <-> `if_b` (in `ns_b`), both up, offloads off (so qdiscs
    /// and captures see wire-sized segments) and receive packet steering over every CPU (so
    /// one flow is not reordered across per-CPU backlogs; STACK.md).
    pub fn veth(&self, ns_a: &str, if_a: &str, ns_b: &str, if_b: &str) -> Result<()> {
        let step = format!("create veth {if_a} ({ns_a}) <-> {if_b} ({ns_b})");
        run(
            &step,
            "ip",
            &[
                "link", "add", if_a, "netns", ns_a, "type", "veth", "peer", "name", if_b, "netns",
                ns_b,
            ],
        )?;
        for (ns, ifname) in [(ns_a, if_a), (ns_b, if_b)] {
            self.tune_interface(ns, ifname)?;
        }
        Ok(())
    }

    fn tune_interface(&self, ns: &str, ifname: &str) -> Result<()> {
        let step = format!("configure {ifname} in {ns}");
        exec::run_in(
            &step,
            ns,
            "ethtool",
            &["-K", ifname, "tso", "off", "gso", "off", "gro", "off"],
        )?;
        let rps = format!("/sys/class/net/{ifname}/queues/rx-0/rps_cpus");
        exec::run_in(
            &step,
            ns,
            "sh",
            &["-c", &format!("echo {} > {rps}", self.rps_mask)],
        )?;
        run(&step, "ip", &["-n", ns, "link", "set", ifname, "up"])?;
        Ok(())
    }

    /// Adds `cidr` (e.g. 10.77.0.1/24) to `ifname` in `ns`.
    pub fn addr(&self, ns: &str, ifname: &str, cidr: &str) -> Result<()> {
        run(
            &format!("address {cidr} on {ifname} in {ns}"),
            "ip",
            &["-n", ns, "addr", "add", cidr, "dev", ifname],
        )
        .map(drop)
    }

    /// A bridge `name` in `ns`, up.
    pub fn bridge(&self, ns: &str, name: &str) -> Result<()> {
        let step = format!("create bridge {name} in {ns}");
        run(
            &step,
            "ip",
            &["-n", ns, "link", "add", name, "type", "bridge"],
        )?;
        run(&step, "ip", &["-n", ns, "link", "set", name, "up"]).map(drop)
    }

    /// Makes `port` a port of bridge `bridge` (both in `ns`).
    pub fn enslave(&self, ns: &str, port: &str, bridge: &str) -> Result<()> {
        run(
            &format!("attach {port} to bridge {bridge} in {ns}"),
            "ip",
            &["-n", ns, "link", "set", port, "master", bridge],
        )
        .map(drop)
    }

    /// Runs `tc ARGS` inside `ns` (qdiscs on the namespace's own interfaces).
    pub fn tc(&self, ns: &str, step: &str, args: &[&str]) -> Result<()> {
        let mut full = vec!["-n", ns];
        full.extend_from_slice(args);
        run(&format!("{step} in {ns}"), "tc", &full).map(drop)
    }

    /// `tc qdisc <verb> dev <dev> root tbf rate <rate> burst <burst> limit <limit>` in `ns`
    /// (`step`: what it is for).
    pub fn tbf(
        &self,
        ns: &str,
        step: &str,
        (verb, dev): (&str, &str),
        (rate, burst, limit): (&str, u64, u64),
    ) -> Result<()> {
        let (burst, limit) = (burst.to_string(), limit.to_string());
        let args = [
            "qdisc", verb, "dev", dev, "root", "tbf", "rate", rate, "burst", &burst, "limit",
            &limit,
        ];
        self.tc(ns, step, &args)
    }

    /// Packets the root qdisc of `dev` in `ns` dropped so far (`tc -s qdisc show`), when it
    /// can be read.
    pub fn qdisc_drops(&self, ns: &str, dev: &str) -> Option<u64> {
        let text = exec::try_run("tc", &["-n", ns, "-s", "qdisc", "show", "dev", dev])?;
        // "Sent 123 bytes 45 pkt (dropped 6, overlimits 7 requeues 0)"
        let after = text.split("dropped ").nth(1)?;
        after
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    }

    /// Runs `ip route ARGS` inside `ns`.
    pub fn route(&self, ns: &str, step: &str, args: &[&str]) -> Result<()> {
        let mut full = vec!["-n", ns, "route"];
        full.extend_from_slice(args);
        run(&format!("{step} in {ns}"), "ip", &full).map(drop)
    }

    /// Loads an nftables ruleset (text for `nft -f -`) inside `ns`. Tables must be named
    /// [`naming::NFT_TABLE`].
    pub fn nft(&self, ns: &str, step: &str, ruleset: &str) -> Result<()> {
        if !ruleset.contains(naming::NFT_TABLE) {
            return Err(Error::invalid(
                step,
                format!("nftables rules must live in table {}", naming::NFT_TABLE),
            ));
        }
        exec::run_with_input(
            &format!("{step} in {ns}"),
            "ip",
            &["netns", "exec", ns, "nft", "-f", "-"],
            Some(ruleset),
        )
        .map(drop)
    }

    /// Removes the lab's nftables table from `ns` (no error if absent).
    pub fn nft_flush(&self, ns: &str) {
        let _ = exec::try_run(
            "ip",
            &[
                "netns",
                "exec",
                ns,
                "nft",
                "delete",
                "table",
                "inet",
                naming::NFT_TABLE,
            ],
        );
    }

    /// Sets sysctl `name` (dotted) to `value` inside `ns`.
    pub fn sysctl(&self, ns: &str, name: &str, value: &str) -> Result<()> {
        exec::run_in(
            &format!("set {name} in {ns}"),
            ns,
            "sysctl",
            &["-qw", &format!("{name}={value}")],
        )
        .map(drop)
    }

    /// Deletes every namespace of this lab after killing processes left inside them (only
    /// processes the lab started can live there). Idempotent; errors are ignored because the
    /// teardown must run to the end.
    pub fn teardown(&mut self) {
        for ns in self.namespaces.drain(..).rev() {
            crate::cleanup::remove_netns(&ns);
        }
    }
}

/// Whether this kernel can build qdisc `kind` (tried on the loopback of a scratch namespace,
/// `tdoc-lab-<pid>-q<kind>`, removed on return).
pub fn qdisc_available(kind: &str) -> Result<bool> {
    let mut lab = Lab::new()?;
    let ns = lab.add_ns(&format!("q{}", kind.replace('_', "")))?;
    Ok(lab
        .tc(
            &ns,
            "try a qdisc",
            &["qdisc", "add", "dev", "lo", "root", kind],
        )
        .is_ok())
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.teardown();
    }
}
