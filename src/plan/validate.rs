//! [`TestPlan::validate`]: every field of a plan against its range and
//! the test it belongs to, in the order the first error is reported. The
//! server runs the same checks on the plan a client sends, so a hostile
//! client gets the range errors a user does. Which options apply to which
//! test is asked of the test's facts (`kinds::Traits`), and each "applies
//! only to" error names the tests the same facts allow
//! ([`TestKind::named`]). A mix is checked part by part (`mix`), the
//! per-socket options by `sockets`.

use super::choices::{Arrivals, CloseMode, Direction};
use super::kinds::{Merit, Rate, TestKind, Traits};
use super::limits;
use super::{DEFAULT_MAX_INFLIGHT, PlanError, TestPlan, sockets};

fn check(flag: &'static str, value: u64, min: u64, max: u64) -> Result<(), PlanError> {
    if value < min || value > max {
        return Err(PlanError::OutOfRange {
            flag,
            value,
            min,
            max,
        });
    }
    Ok(())
}

/// [`check`] of a duration, said in the units it is typed in.
fn check_ns(flag: &'static str, ns: u64, min: u64, max: u64) -> Result<(), PlanError> {
    check_in(flag, ns, min, max, crate::units::fmt_duration_ns)
}

/// [`check`] of a rate in bit/s, said in the units it is typed in.
fn check_bps(flag: &'static str, bps: u64, min: u64, max: u64) -> Result<(), PlanError> {
    check_in(flag, bps, min, max, crate::units::fmt_rate_bps)
}

fn check_in(
    flag: &'static str,
    value: u64,
    min: u64,
    max: u64,
    fmt: fn(u64) -> String,
) -> Result<(), PlanError> {
    if value < min || value > max {
        return Err(PlanError::OutOfRangeIn {
            flag,
            value: fmt(value),
            min: fmt(min),
            max: fmt(max),
        });
    }
    Ok(())
}

impl TestPlan {
    /// Check every field against its range and the test it belongs to: a
    /// mix part by part (`plan::mix`), a single test step by step below, in
    /// the order the first error is reported. Which options apply to which
    /// tests is asked of the test's facts (`kinds::Traits`), and the
    /// message names the tests the same facts allow.
    pub fn validate(&self) -> Result<(), PlanError> {
        self.validate_spin()?;
        if !self.parts.is_empty() {
            return self.validate_parts();
        }
        self.validate_flows_and_window()?;
        self.validate_transactions()?;
        self.validate_bytes()?;
        self.validate_sizes()?;
        self.validate_direction()?;
        self.validate_test_flags()?;
        self.validate_open_loop()?;
        self.validate_call_times()?;
        self.validate_percentiles()?;
        self.validate_socket_options()
    }

    /// Flows, threads and the window's lengths.
    fn validate_flows_and_window(&self) -> Result<(), PlanError> {
        use limits::*;
        check("--flows", self.flows as u64, 1, MAX_FLOWS as u64)?;
        check("--threads", self.threads as u64, 1, MAX_THREADS as u64)?;
        if self.threads > self.flows {
            return Err(PlanError::Invalid(format!(
                "--threads {} is more than --flows {} (accepted: 1..=flows)",
                self.threads, self.flows
            )));
        }
        check_ns(
            "--duration",
            self.duration_ns,
            MIN_DURATION_NS,
            MAX_DURATION_NS,
        )?;
        check_ns("--warmup", self.warmup_ns, 0, MAX_DURATION_NS)?;
        check_ns("--cooldown", self.cooldown_ns, 0, MAX_DURATION_NS)?;
        check_ns(
            "--interval",
            self.interval_ns,
            MIN_INTERVAL_NS,
            MAX_DURATION_NS,
        )?;
        Ok(())
    }

    /// `--transactions`: a count-limited run.
    fn validate_transactions(&self) -> Result<(), PlanError> {
        let t = self.test;
        if let Some(n) = self.transactions {
            let counted = |x: &Traits| x.merit == Merit::Transactions;
            if !counted(t.traits()) {
                return Err(PlanError::NotApplicable {
                    flag: "--transactions",
                    applies: TestKind::named(counted),
                    test: t,
                });
            }
            check("--transactions", n, 1, u64::MAX / 2)?;
            // The count-limited window starts at the first transaction and ends
            // at the last: a warm-up would blur where the N are counted, and
            // after the quota the flows are idle, so a cool-down carries nothing.
            if self.warmup_ns > 0 || self.cooldown_ns > 0 {
                return Err(PlanError::Invalid(
                    "--warmup and --cooldown apply to time-limited runs; with --transactions the window starts at the first transaction (accepted: 0)".into(),
                ));
            }
            if n < self.flows as u64 {
                return Err(PlanError::Invalid(format!(
                    "--transactions {n} is fewer than --flows {} (accepted: at least one per flow)",
                    self.flows
                )));
            }
        }
        Ok(())
    }

    /// `--bytes`: a byte-limited bulk run.
    fn validate_bytes(&self) -> Result<(), PlanError> {
        let t = self.test;
        let Some(n) = self.bytes else {
            return Ok(());
        };
        // The bulk tests, whose load is counted in bytes: TCP's, and
        // udp_stream's numbered datagrams (capacity's trains are a probe,
        // not a load to count).
        let counted = |x: &Traits| x.carries_load();
        if !counted(t.traits()) {
            return Err(PlanError::NotApplicable {
                flag: "--bytes",
                applies: TestKind::named(counted),
                test: t,
            });
        }
        check("--bytes", n, 1, u64::MAX / 2)?;
        if self.transactions.is_some() {
            return Err(PlanError::Invalid(
                "--bytes and --transactions do not combine".into(),
            ));
        }
        if self.warmup_ns > 0 || self.cooldown_ns > 0 {
            return Err(PlanError::Invalid(
                "--warmup and --cooldown apply to time-limited runs; with --bytes the window starts at the first byte and ends when the last arrives (accepted: 0)".into(),
            ));
        }
        if self.zerocopy {
            return Err(PlanError::Invalid(
                "--bytes and --zerocopy do not combine: the zero-copy ring sends whole buffers"
                    .into(),
            ));
        }
        if n < self.flows as u64 {
            return Err(PlanError::Invalid(format!(
                "--bytes {n} is fewer than --flows {} (accepted: at least one byte per flow)",
                self.flows
            )));
        }
        Ok(())
    }

    /// Burst, delay, message sizes, `--rate` in bit/s and the rr timeout.
    fn validate_sizes(&self) -> Result<(), PlanError> {
        use limits::*;
        let t = self.test;
        let f = t.traits();
        if self.burst > 0 && !f.burst {
            return Err(PlanError::NotApplicable {
                flag: "--burst",
                applies: TestKind::named(|x| x.burst),
                test: t,
            });
        }
        check("--burst", self.burst as u64, 0, MAX_BURST as u64)?;
        if self.delay_ns > 0 {
            if !f.delay {
                return Err(PlanError::NotApplicable {
                    flag: "--delay",
                    applies: TestKind::named(|x| x.delay),
                    test: t,
                });
            }
            check_ns("--delay", self.delay_ns, MIN_DELAY_NS, MAX_DELAY_NS)?;
        }
        let max_rr = if f.rr_is_datagram() {
            MAX_DATAGRAM_BYTES
        } else {
            MAX_RR_BYTES
        };
        check("--rr-size (request)", self.request_bytes, 1, max_rr)?;
        check("--rr-size (response)", self.response_bytes, 1, max_rr)?;
        let max_send = if f.send_is_datagram() {
            MAX_DATAGRAM_BYTES
        } else {
            MAX_IO_BYTES
        };
        check(f.send_flag, self.send_bytes, f.min_send_bytes, max_send)?;
        if let Some(r) = self.rate_bps {
            if !f.rate.in_bits() {
                return Err(PlanError::NotApplicable {
                    flag: "--rate",
                    applies: format!(
                        "{} (tcp tests: --pacing-rate)",
                        TestKind::named(|x| x.rate.in_bits())
                    ),
                    test: t,
                });
            }
            check_bps("--rate", r, 8, 1_000_000_000_000)?;
        }
        check_ns(
            "--rr-timeout",
            self.rr_timeout_ns,
            1_000_000,
            60_000_000_000,
        )?;
        check("--recv-size", self.recv_bytes, 1, MAX_IO_BYTES)?;
        Ok(())
    }

    /// `--reverse` and `--both` (capacity).
    fn validate_direction(&self) -> Result<(), PlanError> {
        let t = self.test;
        if self.direction != Direction::Forward {
            let flag = match self.direction {
                Direction::Both => "--both",
                _ => "--reverse",
            };
            if !t.traits().reverse {
                return Err(PlanError::NotApplicable {
                    flag,
                    applies: format!(
                        "{} (tcp_maerts is tcp_stream reversed, tcp_bidir both ways)",
                        TestKind::named(|x| x.reverse)
                    ),
                    test: t,
                });
            }
            if self.direction == Direction::Both && self.flows % 2 != 0 {
                return Err(PlanError::Invalid(format!(
                    "--both runs alternate flows each way: --flows {} in all is odd (accepted: an even number)",
                    self.flows
                )));
            }
        }
        Ok(())
    }

    /// `--gso`, `--zerocopy` and `--close rst`, each for its tests.
    fn validate_test_flags(&self) -> Result<(), PlanError> {
        let t = self.test;
        let f = t.traits();
        if self.gso {
            if !f.gso {
                return Err(PlanError::NotApplicable {
                    flag: "--gso",
                    applies: TestKind::named(|x| x.gso),
                    test: t,
                });
            }
            if self.rate_bps.is_some() {
                return Err(PlanError::Invalid(
                    "--gso applies to unpaced udp_stream (accepted: without --rate)".into(),
                ));
            }
        }
        if self.zerocopy && !f.zerocopy {
            return Err(PlanError::NotApplicable {
                flag: "--zerocopy",
                applies: TestKind::named(|x| x.zerocopy),
                test: t,
            });
        }
        if self.zerocopy && self.gso {
            return Err(PlanError::Invalid(
                "--gso and --zerocopy do not combine: udp_stream's zero-copy ring holds 256 datagrams, and as UDP_SEGMENT messages of up to 64 KB it would pin 16 MB per flow (accepted: one of them)".into(),
            ));
        }
        if self.close == CloseMode::Rst && !f.close {
            return Err(PlanError::NotApplicable {
                flag: "--close rst",
                applies: TestKind::named(|x| x.close),
                test: t,
            });
        }
        if self.one_way {
            if !f.one_way {
                return Err(PlanError::NotApplicable {
                    flag: "--one-way",
                    applies: TestKind::named(|x| x.one_way),
                    test: t,
                });
            }
            use limits::{
                ONE_WAY_REQUEST_BYTES as OWD_REQUEST, ONE_WAY_RESPONSE_BYTES as OWD_RESPONSE,
            };
            if self.request_bytes < OWD_REQUEST || self.response_bytes < OWD_RESPONSE {
                return Err(PlanError::Invalid(format!(
                    "--one-way needs requests of {OWD_REQUEST} bytes or more and responses of {OWD_RESPONSE} or more, to carry the stamps (accepted: -r {OWD_REQUEST},{OWD_RESPONSE} or larger)"
                )));
            }
        }
        sockets::validate(self)?;
        Ok(())
    }

    /// `--spin`: the closed-loop request/response tests alone, on the
    /// workers' own polling loop. An open-loop schedule sleeps to its next
    /// send, io_uring waits in the kernel for completions, and a mix's bulk
    /// parts would take the CPUs its probes measure.
    fn validate_spin(&self) -> Result<(), PlanError> {
        if !self.spin {
            return Ok(());
        }
        if !self.parts.is_empty() {
            return Err(PlanError::Invalid(format!(
                "--spin applies to a single test, not a mix (accepted: {} alone)",
                TestKind::named(|x| x.spin)
            )));
        }
        if !self.test.traits().spin {
            return Err(PlanError::NotApplicable {
                flag: "--spin",
                applies: TestKind::named(|x| x.spin),
                test: self.test,
            });
        }
        if self.offered_per_s.is_some() {
            return Err(PlanError::Invalid(
                "--spin applies to closed-loop runs (accepted: without --rate)".into(),
            ));
        }
        if self.driver == crate::plan::DriverChoice::Uring {
            return Err(PlanError::Invalid(
                "--spin polls with non-blocking receives on the workers' own loop, not io_uring (accepted: --driver auto or epoll)".into(),
            ));
        }
        Ok(())
    }

    /// `--call-times` (the stream tests).
    fn validate_call_times(&self) -> Result<(), PlanError> {
        let t = self.test;
        if self.call_times && !t.traits().call_times {
            return Err(PlanError::NotApplicable {
                flag: "--call-times",
                applies: TestKind::named(|x| x.call_times),
                test: t,
            });
        }
        Ok(())
    }

    /// `--percentiles`: how many, and each in (0, 100].
    fn validate_percentiles(&self) -> Result<(), PlanError> {
        use limits::*;
        if self.percentiles.len() > MAX_PERCENTILES {
            return Err(PlanError::Invalid(format!(
                "--percentiles lists {} values (accepted: at most {MAX_PERCENTILES})",
                self.percentiles.len()
            )));
        }
        if let Some(p) = self
            .percentiles
            .iter()
            .find(|p| !(p.is_finite() && **p > 0.0 && **p <= 100.0))
        {
            return Err(PlanError::Invalid(format!(
                "--percentiles {p} is out of range (accepted: greater than 0 and at most 100)"
            )));
        }
        Ok(())
    }

    /// Both ends' socket options: buffers, MSS, congestion control, pacing, busy polling and CPU pinning.
    pub(super) fn validate_socket_options(&self) -> Result<(), PlanError> {
        use limits::*;
        for (flag, v) in [
            ("--local-buffer (send)", self.local.send_buffer_bytes),
            ("--local-buffer (receive)", self.local.recv_buffer_bytes),
            ("--remote-buffer (send)", self.remote.send_buffer_bytes),
            ("--remote-buffer (receive)", self.remote.recv_buffer_bytes),
        ] {
            if let Some(v) = v {
                check(flag, v, 1, MAX_BUFFER_BYTES)?;
            }
        }
        if let Some(mss) = self.mss {
            check("--mss", mss as u64, 88, 65535)?;
        }
        if let Some(cc) = &self.congestion
            && !limits::is_congestion_name(cc)
        {
            return Err(PlanError::Invalid(format!(
                "--cc '{cc}' is not a congestion control name (accepted: 1 to 15 letters, digits or '_', e.g. cubic, bbr)"
            )));
        }
        if let Some(r) = self.pacing_rate_bps {
            check_bps("--pacing-rate", r, 8, u64::MAX / 2)?;
        }
        if let Some(us) = self.busy_poll_us {
            check(
                "--busy-poll (µs)",
                us as u64,
                1,
                limits::MAX_BUSY_POLL_US as u64,
            )?;
        }
        for (flag, cpus) in [
            ("--cpu-pin", &self.local.cpu_pin),
            ("--remote-cpu-pin", &self.remote.cpu_pin),
        ] {
            if cpus.len() > 4096 {
                return Err(PlanError::Invalid(format!(
                    "{flag} lists more than 4096 CPUs"
                )));
            }
            for &c in cpus {
                check(flag, c as u64, 0, 4095)?;
            }
        }
        Ok(())
    }

    /// `--rate` for the request/response tests, and the options that go with it.
    pub(super) fn validate_open_loop(&self) -> Result<(), PlanError> {
        let t = self.test;
        let Some(r) = self.offered_per_s else {
            if self.arrivals != Arrivals::Fixed {
                return Err(PlanError::Invalid(
                    "--arrivals applies with --rate (open loop); without it the test is closed-loop".into(),
                ));
            }
            if self.max_inflight != DEFAULT_MAX_INFLIGHT {
                return Err(PlanError::Invalid(
                    "--max-inflight applies with --rate (open loop); closed-loop tests keep --burst + 1 in flight".into(),
                ));
            }
            return Ok(());
        };
        let f = t.traits();
        if f.rate != Rate::Transactions {
            return Err(PlanError::NotApplicable {
                flag: "--rate (transactions/s)",
                applies: TestKind::named(|x| x.rate == Rate::Transactions),
                test: t,
            });
        }
        check("--rate (transactions/s)", r, 1, limits::MAX_OFFERED_PER_S)?;
        if self.delay_ns > 0 {
            return Err(PlanError::Invalid(
                "--delay and --rate do not combine: --delay pauses a closed loop between a response and the next request; with --rate the schedule decides when each request goes".into(),
            ));
        }
        if self.burst > 0 {
            return Err(PlanError::Invalid(
                "--burst and --rate do not combine: with --rate the schedule decides how many transactions are in flight (bound them with --max-inflight)".into(),
            ));
        }
        check(
            "--max-inflight",
            self.max_inflight as u64,
            1,
            limits::MAX_INFLIGHT as u64,
        )?;
        if !f.max_inflight && self.max_inflight != DEFAULT_MAX_INFLIGHT {
            return Err(PlanError::Invalid(format!(
                "--max-inflight applies to {}; {t} with --rate has one connection open per flow (more at once: -F)",
                TestKind::named(|x| x.max_inflight)
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reverse_and_both_belong_to_capacity() {
        let mut p = TestPlan::new(TestKind::TcpStream);
        p.direction = Direction::Reverse;
        let e = p.validate().unwrap_err().to_string();
        assert!(e.contains("--reverse") && e.contains("capacity"), "{e}");
        let mut p = TestPlan::new(TestKind::Capacity);
        p.direction = Direction::Reverse;
        assert_eq!(p.validate(), Ok(()));
        p.direction = Direction::Both;
        p.flows = 3;
        let e = p.validate().unwrap_err().to_string();
        assert!(e.contains("--both") && e.contains("even"), "{e}");
        p.flows = 2;
        assert_eq!(p.validate(), Ok(()));
        // Forward is left out of the plan on the wire: older peers read it.
        let forward = serde_json::to_string(&TestPlan::new(TestKind::Capacity)).unwrap();
        assert!(!forward.contains("direction"), "{forward}");
        let both: TestPlan = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        assert_eq!(both.direction, Direction::Both);
    }

    #[test]
    fn limits_are_said_in_the_units_they_are_typed_in() {
        let mut p = TestPlan::new(TestKind::TcpRr);
        p.duration_ns = 500_000;
        let e = p.validate().unwrap_err().to_string();
        assert_eq!(e, "--duration 500us is out of range (accepted: 1ms..=24h)");
        let mut p = TestPlan::new(TestKind::UdpStream);
        p.rate_bps = Some(4);
        let e = p.validate().unwrap_err().to_string();
        assert_eq!(
            e,
            "--rate 4 bit/s is out of range (accepted: 8 bit/s..=1T bit/s)"
        );
    }

    #[test]
    fn rejects_zero_flows_and_burst_on_streams() {
        let mut p = TestPlan::new(TestKind::TcpStream);
        p.flows = 0;
        let e = p.validate().unwrap_err().to_string();
        assert!(e.contains("--flows 0") && e.contains("1..=100000"), "{e}");
        let mut p = TestPlan::new(TestKind::TcpStream);
        p.burst = 4;
        let e = p.validate().unwrap_err().to_string();
        assert!(e.contains("--burst") && e.contains("tcp_rr"), "{e}");
    }

    /// Each option's "applies only to" list, built from the tests' facts,
    /// says what it said when it was written out by hand (the open loop's
    /// now in `TestKind::ALL`'s order, as the others).
    #[test]
    fn applies_lists_name_the_tests_the_facts_allow() {
        let err = |t: TestKind, f: &dyn Fn(&mut TestPlan)| {
            let mut p = TestPlan::new(t);
            f(&mut p);
            p.validate().unwrap_err().to_string()
        };
        use TestKind::*;
        for (e, want) in [
            (
                err(TcpStream, &|p| p.burst = 1),
                "--burst applies only to tcp_rr and udp_rr, not to tcp_stream",
            ),
            (
                err(TcpStream, &|p| p.transactions = Some(10)),
                "--transactions applies only to tcp_rr, tcp_crr, tcp_cc and udp_rr, not to tcp_stream",
            ),
            (
                err(TcpRr, &|p| p.rate_bps = Some(1000)),
                "--rate applies only to udp_stream and capacity (tcp tests: --pacing-rate), not to tcp_rr",
            ),
            (
                err(UdpStream, &|p| p.offered_per_s = Some(10)),
                "--rate (transactions/s) applies only to tcp_rr, tcp_crr, tcp_cc and udp_rr, not to udp_stream",
            ),
            (
                err(TcpStream, &|p| p.direction = Direction::Reverse),
                "--reverse applies only to capacity (tcp_maerts is tcp_stream reversed, tcp_bidir both ways), not to tcp_stream",
            ),
            (
                err(UdpRr, &|p| p.gso = true),
                "--gso applies only to udp_stream, not to udp_rr",
            ),
            (
                err(UdpRr, &|p| p.zerocopy = true),
                "--zerocopy applies only to tcp_stream, tcp_maerts, tcp_bidir and udp_stream, not to udp_rr",
            ),
            (
                err(TcpRr, &|p| p.call_times = true),
                "--call-times applies only to tcp_stream, tcp_maerts and tcp_bidir, not to tcp_rr",
            ),
            (
                err(TcpRr, &|p| p.close = CloseMode::Rst),
                "--close rst applies only to tcp_crr and tcp_cc, not to tcp_rr",
            ),
            (
                err(TcpCc, &|p| {
                    p.offered_per_s = Some(10);
                    p.max_inflight = 4;
                }),
                "--max-inflight applies to tcp_rr and udp_rr; tcp_cc with --rate has one connection open per flow (more at once: -F)",
            ),
            (
                err(Capacity, &|p| p.send_bytes = 11),
                "--packet-size 11 is out of range (accepted: 12..=65507)",
            ),
            (
                err(UdpStream, &|p| p.send_bytes = 65_508),
                "--send-size 65508 is out of range (accepted: 1..=65507)",
            ),
            (
                err(UdpRr, &|p| p.request_bytes = 65_508),
                "--rr-size (request) 65508 is out of range (accepted: 1..=65507)",
            ),
        ] {
            assert_eq!(e, want);
        }
        // Sizes a test does not send are held to the wider limits.
        let mut p = TestPlan::new(UdpStream);
        p.request_bytes = 65_508;
        assert_eq!(p.validate(), Ok(()));
        let mut p = TestPlan::new(UdpRr);
        p.send_bytes = 65_508;
        assert_eq!(p.validate(), Ok(()));
        assert_eq!(TestPlan::new(Capacity).send_bytes, 1472);
        assert_eq!(TestPlan::new(TcpStream).send_bytes, 128 << 10);
    }

    #[test]
    fn close_rst_is_for_connection_tests_and_fin_by_default() {
        for t in TestKind::ALL {
            let mut p = TestPlan::new(t);
            assert_eq!(p.close, CloseMode::Fin);
            p.close = CloseMode::Rst;
            let conn = matches!(t, TestKind::TcpCrr | TestKind::TcpCc);
            match p.validate() {
                Ok(()) => assert!(conn, "{t}"),
                Err(e) => {
                    assert!(!conn, "{t}: {e}");
                    assert!(e.to_string().contains("--close rst"), "{e}");
                    assert!(e.to_string().contains("tcp_crr and tcp_cc"), "{e}");
                }
            }
        }
        assert!(
            "syn"
                .parse::<CloseMode>()
                .unwrap_err()
                .to_string()
                .contains("accepted: fin, rst")
        );
        // A plan from a peer that predates the option: fin.
        let mut v = serde_json::to_value(TestPlan::new(TestKind::TcpCrr)).unwrap();
        assert_eq!(v["close"], "fin");
        v.as_object_mut().unwrap().remove("close");
        let p: TestPlan = serde_json::from_value(v).unwrap();
        assert_eq!(p.close, CloseMode::Fin);
    }

    #[test]
    fn zerocopy_is_for_bulk_tests_and_optional_on_the_wire() {
        for t in TestKind::ALL {
            let mut p = TestPlan::new(t);
            p.zerocopy = true;
            let bulk = matches!(
                t,
                TestKind::TcpStream
                    | TestKind::TcpMaerts
                    | TestKind::TcpBidir
                    | TestKind::UdpStream
            );
            match p.validate() {
                Ok(()) => assert!(bulk, "{t}"),
                Err(e) => {
                    assert!(!bulk, "{t}: {e}");
                    assert!(e.to_string().contains("--zerocopy"), "{e}");
                }
            }
        }
        let mut p = TestPlan::new(TestKind::UdpStream);
        p.zerocopy = true;
        p.gso = true;
        let e = p.validate().unwrap_err().to_string();
        assert!(e.contains("--gso and --zerocopy do not combine"), "{e}");
        // A plan from a peer that predates the options: off.
        let mut v = serde_json::to_value(TestPlan::new(TestKind::TcpStream)).unwrap();
        v.as_object_mut().unwrap().remove("zerocopy");
        v.as_object_mut().unwrap().remove("gso");
        let p: TestPlan = serde_json::from_value(v).unwrap();
        assert!(!p.zerocopy && !p.gso);
    }

    #[test]
    fn gso_is_for_unpaced_udp_stream() {
        let mut p = TestPlan::new(TestKind::UdpStream);
        p.gso = true;
        assert_eq!(p.validate(), Ok(()));
        p.rate_bps = Some(1_000_000);
        assert!(p.validate().unwrap_err().to_string().contains("--gso"));
        let mut p = TestPlan::new(TestKind::UdpRr);
        p.gso = true;
        let e = p.validate().unwrap_err().to_string();
        assert!(e.contains("--gso") && e.contains("udp_stream"), "{e}");
    }

    /// `--one-way`: udp_rr and tcp_rr only, and sizes that carry the stamps.
    #[test]
    fn one_way_is_for_the_rr_tests_with_room_for_the_stamps() {
        for kind in [TestKind::UdpRr, TestKind::TcpRr] {
            let mut p = TestPlan::new(kind);
            p.one_way = true;
            let e = p.validate().unwrap_err().to_string();
            assert!(e.contains("--one-way") && e.contains("-r 16,32"), "{e}");
            (p.request_bytes, p.response_bytes) = (16, 32);
            assert_eq!(p.validate(), Ok(()));
        }
        let mut p = TestPlan::new(TestKind::TcpCrr);
        p.one_way = true;
        let e = p.validate().unwrap_err().to_string();
        assert!(
            e.contains("--one-way") && e.contains("tcp_rr") && e.contains("udp_rr"),
            "{e}"
        );
    }

    /// `--bytes`: TCP bulk tests only, split over the flows to
    /// a byte, and none of what a timed window needs.
    #[test]
    fn bytes_are_for_tcp_bulk_tests_and_split_to_a_byte() {
        let mut p = TestPlan::new(TestKind::TcpStream);
        p.bytes = Some(10);
        p.flows = 3;
        p.warmup_ns = 0;
        assert_eq!(p.validate(), Ok(()));
        assert!(p.count_limited());
        let q: Vec<u64> = (0..3).map(|f| p.flow_bytes(f).unwrap()).collect();
        assert_eq!(q, [4, 3, 3]);
        for t in [TestKind::TcpRr, TestKind::TcpCrr, TestKind::UdpRr] {
            p.test = t;
            let e = p.validate().unwrap_err().to_string();
            assert!(e.contains("--bytes applies only to tcp_stream"), "{e}");
        }
        p.test = TestKind::TcpMaerts;
        p.warmup_ns = 1;
        assert!(p.validate().unwrap_err().to_string().contains("--warmup"));
        p.warmup_ns = 0;
        p.bytes = Some(2);
        assert!(
            p.validate()
                .unwrap_err()
                .to_string()
                .contains("one byte per flow")
        );
    }
}
