//! io_uring's own NAPI busy polling (`IORING_REGISTER_NAPI`, Linux 6.9):
//! with `--driver uring` and `--busy-poll USEC`, every ring of both ends
//! is registered to busy-poll the NAPI instances of the sockets it serves
//! for up to USEC µs while it waits for completions, preferring busy
//! polling to interrupts with `--prefer-busy-poll`, and the setting is read
//! back from the kernel so that a result says what the ring got.
//!
//! This is apart from SO_BUSY_POLL ([`super::busypoll`]), which stays set
//! on the sockets: the socket option acts where a receive call finds
//! nothing queued, and io_uring's receives never block there (a multishot
//! receive waits in the ring), so a uring worker busy-polls only through
//! the ring's registration, in `io_uring_enter`'s wait. Both act only where
//! the receiving device has NAPI: loopback and veth have none, so there a
//! registration succeeds and changes nothing measurable.
//!
//! The kernel writes the previous setting back into the argument of a
//! registration, so registering the same setting twice reads back what
//! the first one applied, and leaves it applied. The read-back is not
//! always the ask: Linux 6.18 keeps a ring's busy-poll time at most
//! 10,000 µs (`--busy-poll 20000` reads back 10000), where SO_BUSY_POLL
//! takes any int. No capability is needed (io_uring/napi.c checks none;
//! an unprivileged user registers as root does). A kernel older than 6.9 answers EINVAL
//! (an unknown registration) and one built without
//! `CONFIG_NET_RX_BUSY_POLL` EOPNOTSUPP: the run is refused naming the
//! flag, since busy polling was asked for and epoll's would not be it.

use std::io;
use std::sync::OnceLock;

use io_uring::{IoUring, Submitter, types::Napi};
use serde::{Deserialize, Serialize};

/// One ring's NAPI busy-polling setting: what was asked for, or what the
/// kernel read back.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct NapiSet {
    /// How long the ring's wait busy-polls, in µs (0: it does not).
    pub busy_poll_us: u32,
    /// Busy polling preferred to the device's interrupts.
    pub prefer_busy_poll: bool,
}

impl NapiSet {
    /// What `--busy-poll` and `--prefer-busy-poll` ask of a ring: nothing
    /// without `--busy-poll` (the kernel's wait busy-polls only for a
    /// non-zero time, so a preference alone would be a no-op).
    pub fn asked(busy_poll_us: Option<u32>, prefer: bool) -> Option<NapiSet> {
        busy_poll_us.map(|us| NapiSet {
            busy_poll_us: us,
            prefer_busy_poll: prefer,
        })
    }

    fn arg(self) -> Napi {
        Napi::new()
            .set_busy_poll_timeout(self.busy_poll_us)
            .set_prefer_busy_poll(self.prefer_busy_poll)
    }
}

/// Register `ask` on the ring of `sub` and return the setting the kernel
/// then holds: a second registration of the same setting, which writes back
/// the current one. The refusal names the flag and what the kernel lacks.
pub fn register(sub: &Submitter<'_>, ask: NapiSet) -> io::Result<NapiSet> {
    let refused = |e| refusal(ask.busy_poll_us, e);
    sub.register_napi(&mut ask.arg()).map_err(refused)?;
    let mut now = ask.arg();
    sub.register_napi(&mut now).map_err(refused)?;
    Ok(NapiSet {
        busy_poll_us: now.busy_poll_timeout(),
        prefer_busy_poll: now.prefer_busy_poll(),
    })
}

/// The kernel's refusal of `--busy-poll us` on a ring, said with what it lacks.
fn refusal(us: u32, e: io::Error) -> io::Error {
    io::Error::new(
        e.kind(),
        format!(
            "--busy-poll {us} with --driver uring needs io_uring NAPI busy polling (IORING_REGISTER_NAPI: Linux 6.9, built with CONFIG_NET_RX_BUSY_POLL); this kernel refused it ({e})"
        ),
    )
}

/// Does this kernel take a NAPI registration? Probed once on a small ring
/// of its own; `Err` is [`register`]'s refusal. Asked before a run that
/// would register, so that a refusal comes before any data socket opens.
pub fn probe(ask: NapiSet) -> io::Result<NapiSet> {
    let ring = IoUring::new(2)?;
    register(&ring.submitter(), ask)
}

/// Whether a NAPI registration works here at all (probed once): `--driver
/// auto` picks io_uring under `--busy-poll` only where it does.
pub fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        probe(NapiSet {
            busy_poll_us: 1,
            prefer_busy_poll: false,
        })
        .is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only `--busy-poll` asks for a registration; the preference rides on it.
    #[test]
    fn asked_needs_a_busy_poll_time() {
        assert_eq!(NapiSet::asked(None, true), None);
        assert_eq!(
            NapiSet::asked(Some(50), true),
            Some(NapiSet {
                busy_poll_us: 50,
                prefer_busy_poll: true
            })
        );
    }

    /// A kernel without the registration (EINVAL before 6.9, EOPNOTSUPP
    /// without CONFIG_NET_RX_BUSY_POLL) is told apart by name.
    #[test]
    fn a_refusal_names_the_flags_and_the_kernel() {
        let e = refusal(50, io::Error::from_raw_os_error(libc::EINVAL)).to_string();
        for needle in [
            "--busy-poll 50",
            "--driver uring",
            "Linux 6.9",
            "Invalid argument",
        ] {
            assert!(e.contains(needle), "{needle}: {e}");
        }
    }

    /// A registration reads back what was asked (this kernel has it from
    /// 6.9 on), both the time and the preference, and a later one replaces
    /// it; where the kernel lacks it, the refusal names the flag.
    #[test]
    fn a_registration_reads_back_what_was_asked() {
        let ring = match IoUring::new(2) {
            Ok(r) => r,
            Err(e) => return eprintln!("skipped: no io_uring here ({e})"),
        };
        let sub = ring.submitter();
        for ask in [
            NapiSet {
                busy_poll_us: 50,
                prefer_busy_poll: true,
            },
            NapiSet {
                busy_poll_us: 5_000,
                prefer_busy_poll: false,
            },
        ] {
            match register(&sub, ask) {
                Ok(got) => assert_eq!(got, ask),
                Err(e) => {
                    let e = e.to_string();
                    assert!(
                        e.starts_with("--busy-poll ") && e.contains("Linux 6.9"),
                        "{e}"
                    );
                    assert!(!available());
                    return;
                }
            }
        }
        assert!(available());
        // Past 10 ms the kernel may keep less than asked: the read-back
        // says what it kept, never more than the ask.
        let long = NapiSet {
            busy_poll_us: 1_000_000,
            prefer_busy_poll: true,
        };
        let got = register(&sub, long).expect("registered before");
        assert!(got.prefer_busy_poll && (1..=long.busy_poll_us).contains(&got.busy_poll_us));
    }
}
