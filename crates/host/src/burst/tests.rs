use super::*;
use tcpdoctor_model::{Rule, Severity};

/// Samples every 100 us for 1 s of an on/off source: `on_us` of `bytes_per_us` every
/// `period_us`, plus one packet per 1000 bytes.
fn on_off(on_us: u64, period_us: u64, bytes_per_us: u64, jitter: bool) -> Samples {
    let mut s = Samples {
        bytes: vec![vec![]],
        packets: vec![vec![]],
        ..Samples::default()
    };
    let (mut b, mut p) = (0u64, 0u64);
    for i in 0..=10_000u64 {
        let t_us = i * 100;
        // A deterministic wobble of up to +-20 us in the sample times.
        let t_ns = t_us * 1000 + if jitter { (i * 7919 % 41) * 1000 } else { 0 };
        s.t_ns
            .push(t_ns.saturating_sub(if jitter { 20_000 } else { 0 }));
        s.bytes[0].push(b);
        s.packets[0].push(p);
        for u in t_us..t_us + 100 {
            if u % period_us < on_us {
                b += bytes_per_us;
                if b % 1000 < bytes_per_us {
                    p += 1;
                }
            }
        }
    }
    s.t_ns[0] = 0;
    s
}

#[test]
fn ten_percent_duty_cycle_is_ten_times_average_at_1ms() {
    let s = on_off(5_000, 50_000, 100, false);
    let st = interval_stats(&s.t_ns, Duration::from_micros(100), 0);
    assert_eq!(st.p50_ns, 100_000);
    assert_eq!(st.error_p99_ns, 0);
    let rep = analyze(&s, &[Direction::Rx], &RESOLUTIONS, st.p50_ns, Some(1e9));
    let res = &rep[0].resolutions;
    let ms = res.iter().find(|r| r.resolution_ns == 1_000_000).unwrap();
    let ratio = ms.max_avg_ratio.unwrap();
    assert!((ratio - 10.0).abs() < 0.3, "{ratio}");
    // 100 B/us = 800 Mbit/s during the burst, 80 Mbit/s on average.
    assert!((ms.peak_rate_bits_per_s - 800e6).abs() < 1e6, "{ms:?}");
    assert!((ms.avg_rate_bits_per_s - 80e6).abs() < 2e6, "{ms:?}");
    assert!((ms.peak_utilisation.unwrap() - 0.8).abs() < 0.01);
    // At 100 ms, two periods per bin: the burst disappears.
    let slow = res.iter().find(|r| r.resolution_ns == 100_000_000).unwrap();
    assert!(slow.max_avg_ratio.unwrap() < 1.2, "{slow:?}");
    // 1 s does not fit twice into 1 s of samples.
    assert!(res.iter().all(|r| r.resolution_ns < 1_000_000_000));
    let f = findings("veth0", &rep, &Thresholds::default());
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].pathology, Pathology::Microburst);
    // 80% of the link at the peak: the policy's budget pressure.
    assert_eq!(f[0].severity, Severity::Warning);
    assert_eq!(f[0].severity_rule, Rule::BudgetPressure);
    assert_eq!(f[0].impact.budget_used, ms.peak_utilisation);
    assert!(f[0].summary.contains("1ms"), "{}", f[0].summary);
}

#[test]
fn jittered_sample_times_still_give_the_true_ratio() {
    let s = on_off(5_000, 50_000, 100, true);
    let st = interval_stats(&s.t_ns, Duration::from_micros(100), 0);
    assert!(st.error_p99_ns >= 20_000, "{st:?}");
    let rep = analyze(&s, &[Direction::Rx], &RESOLUTIONS, st.p50_ns, None);
    let ms = rep[0]
        .resolutions
        .iter()
        .find(|r| r.resolution_ns == 1_000_000)
        .unwrap();
    let ratio = ms.max_avg_ratio.unwrap();
    assert!((ratio - 10.0).abs() < 0.6, "{ratio}");
    assert_eq!(ms.peak_utilisation, None);
    // Without a link speed the burst is named, but nothing says it filled the link.
    let f = findings("veth0", &rep, &Thresholds::default());
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].severity, Severity::Info);
    assert!(
        f[0].summary.contains("link speed unknown"),
        "{}",
        f[0].summary
    );
}

#[test]
fn a_burst_at_line_rate_uses_up_the_link() {
    // 1000 B/us during the burst = 8 Gbit/s on a 8 Gbit/s link.
    let s = on_off(5_000, 50_000, 1_000, false);
    let rep = analyze(&s, &[Direction::Rx], &RESOLUTIONS, 100_000, Some(8e9));
    let f = findings("veth0", &rep, &Thresholds::default());
    assert_eq!(f[0].severity, Severity::Critical);
    assert_eq!(f[0].severity_rule, Rule::BudgetExhausted);
}

#[test]
fn steady_or_idle_traffic_is_not_a_burst() {
    let steady = on_off(50_000, 50_000, 10, false);
    let rep = analyze(&steady, &[Direction::Tx], &RESOLUTIONS, 100_000, Some(1e10));
    for r in &rep[0].resolutions {
        assert!(r.max_avg_ratio.unwrap() < 1.1, "{r:?}");
    }
    assert!(findings("x", &rep, &Thresholds::default()).is_empty());
    // One 1500 B packet in a second: a huge ratio but not a burst.
    let mut one = on_off(0, 50_000, 0, false);
    for (i, v) in one.bytes[0].iter_mut().enumerate() {
        if i > 5000 {
            *v = 1500;
        }
    }
    for (i, v) in one.packets[0].iter_mut().enumerate() {
        if i > 5000 {
            *v = 1;
        }
    }
    let rep = analyze(&one, &[Direction::Rx], &RESOLUTIONS, 100_000, None);
    assert!(rep[0].resolutions[1].max_avg_ratio.unwrap() > 100.0);
    assert!(findings("x", &rep, &Thresholds::default()).is_empty());
    let idle = on_off(0, 50_000, 0, false);
    let rep = analyze(&idle, &[Direction::Rx], &RESOLUTIONS, 100_000, None);
    assert_eq!(rep[0].resolutions[0].max_avg_ratio, None);
}

#[test]
fn resolutions_finer_than_the_samples_are_left_out() {
    let s = on_off(5_000, 50_000, 100, false);
    let rep = analyze(&s, &[Direction::Rx], &RESOLUTIONS, 1_000_000, None);
    assert_eq!(rep[0].resolutions[0].resolution_ns, 1_000_000);
}

#[test]
fn interval_percentiles() {
    let t = [0, 100, 210, 300, 400, 900];
    let st = interval_stats(&t, Duration::from_nanos(100), 3);
    assert_eq!(st.p50_ns, 100);
    assert_eq!(st.max_ns, 500);
    assert_eq!(st.error_p99_ns, 400);
    assert_eq!(st.missed_slots, 3);
}

#[test]
fn samples_loopback_in_both_modes() {
    let stop = AtomicBool::new(false);
    for mode in [Mode::Sleep, Mode::BusyPoll { cpu: None }] {
        let cfg = Config {
            iface: "lo".into(),
            directions: vec![Direction::Rx, Direction::Tx],
            interval: Duration::from_micros(500),
            duration: Duration::from_millis(50),
            mode,
            realtime: true,
        };
        let s = sample(&cfg, &stop).unwrap();
        assert!(s.t_ns.len() > 20, "{mode:?}: {}", s.t_ns.len());
        assert_eq!(s.bytes.len(), 2);
        assert!(s.t_ns.windows(2).all(|w| w[1] > w[0]));
        assert!(s.bytes[0].windows(2).all(|w| w[1] >= w[0]));
    }
    stop.store(true, Ordering::SeqCst);
    let cfg = Config {
        iface: "lo".into(),
        directions: vec![Direction::Rx],
        interval: Duration::from_micros(500),
        duration: Duration::from_secs(10),
        mode: Mode::Sleep,
        realtime: false,
    };
    let s = sample(&cfg, &stop).unwrap();
    assert!(s.interrupted);
}
