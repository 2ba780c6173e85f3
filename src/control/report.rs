//! The server's final report of a session: every part's counts (udp_stream's
//! loss made exact from what the client says it sent), its usage, window
//! readings, errors, refusals, retransmissions, zero-copy, socket buffers
//! and options, call times and capacity train gaps, gathered from its
//! engines once they have stopped. Kept apart from `session`, whose steps
//! end with it.

use super::proto::{Final, Rusage};
use crate::io::socket::SocketBuffers;
use crate::plan::{Loss, TestPlan};
use crate::sensors::Provenance;

/// What the server's final report is made of, besides its engines'
/// leftovers and its own readings.
pub(super) struct Report<'a> {
    pub(super) plan: &'a TestPlan,
    pub(super) parts: &'a [TestPlan],
    /// `finish`: the datagrams each flow of the client sent (udp_stream).
    pub(super) client_sent: &'a [u64],
    /// Connections and datagrams refused while setting the flows up.
    pub(super) refused: u64,
    /// The descriptor limit was below what the flows need.
    pub(super) fd_warning: Option<String>,
    pub(super) ipv6: bool,
}

impl Report<'_> {
    /// The final report: every part's counts (udp_stream's loss made exact
    /// from what the client says it sent), usage, window readings, errors,
    /// refusals, retransmissions, zero-copy, socket buffers, call times and
    /// capacity train gaps.
    pub(super) fn final_of(
        self,
        outs: &[crate::engine::EngineOutcome],
        rusage: Rusage,
        window: Option<crate::sensors::window::WindowStats>,
        provenance: Provenance,
    ) -> Final {
        let (plan, parts) = (self.plan, self.parts);
        let mut counts = Vec::with_capacity(plan.flows as usize);
        let mut errors: Vec<String> = self.fd_warning.into_iter().collect();
        let mut part_retransmits = Vec::with_capacity(parts.len());
        let mut refused = self.refused;
        let mut offset = 0;
        for (p, out) in parts.iter().zip(outs) {
            let mut c = out.counts.clone();
            let sent = self.client_sent.get(offset..offset + c.len());
            offset += c.len();
            if let (Loss::Datagrams, Some(sent)) = (p.test.traits().loss, sent) {
                // The exact loss: what the client sent that never arrived, including
                // losses at the tail that no later datagram revealed.
                for (c, sent) in c.iter_mut().zip(sent) {
                    c.lost = sent.saturating_sub(c.datagrams_received);
                }
            }
            counts.extend(c);
            errors.extend(out.error.clone());
            part_retransmits.push(crate::engine::tcp_retransmits(&out.flows));
            refused += out.flows.iter().map(|f| f.refused()).sum::<u64>();
        }
        let tcp_retransmits = part_retransmits
            .iter()
            .flatten()
            .copied()
            .reduce(|a, b| a + b);
        Final {
            counts,
            rusage,
            errors,
            refused,
            window: window.map(Box::new),
            provenance: Some(Box::new(provenance)),
            tcp_retransmits,
            zerocopy: outs
                .iter()
                .find_map(|o| crate::engine::zerocopy_counts(&o.flows)),
            part_retransmits: if !plan.parts.is_empty() {
                part_retransmits
            } else {
                Vec::new()
            },
            socket_buffers: SocketBuffers::as_set(plan, &plan.local, plan.test.is_udp(), self.ipv6)
                .ok(),
            busy_poll: crate::io::busypoll::as_set(
                plan.busy_poll_us,
                plan.prefer_busy_poll,
                plan.test.is_udp(),
                self.ipv6,
            )
            .ok()
            .flatten(),
            uring_napi: outs.iter().find_map(|o| o.napi),
            socket_options: crate::io::sockmark::read_back_or_probe(
                crate::engine::first_tcp_socket(outs),
                &plan.sockets,
                plan.test.is_udp(),
            ),
            congestion_control: crate::io::congestion::of_or_probe(
                crate::engine::first_tcp_socket(outs),
                plan.congestion.as_deref(),
                plan.test.is_udp(),
            ),
            call_times: outs
                .iter()
                .find_map(|o| crate::engine::call_times(&o.flows))
                .map(Box::new),
            train_gaps: crate::stats::dispersion::TrainGaps::merged(
                outs.iter()
                    .flat_map(|o| o.flows.iter().filter_map(|f| f.train_gaps())),
            ),
        }
    }
}
