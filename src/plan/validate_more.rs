//! Two of [`TestPlan::validate`]'s checks, kept apart so plan.rs stays
//! readable: both ends' socket options (buffers, MSS, congestion control,
//! pacing, busy polling, pinning) and the open-loop rate's options.

use super::*;

impl TestPlan {
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
            && (cc.is_empty()
                || cc.len() > 15
                || !cc.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
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
