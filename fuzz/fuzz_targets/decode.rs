//! Fuzz the control-message decoder: any bytes, as a stream of frames and as
//! one frame read with and without the pre-authentication size limit, and
//! with the limit a session sets after its spec (sized to its flows: the
//! first byte picks how many), must give a message or an error, never a
//! panic or a large allocation. Both directions' decoders are fed: the
//! server reads client messages, the client reads server messages.
#![no_main]

use libfuzzer_sys::fuzz_target;
use thrum::control::proto::{
    ClientMsg, ServerMsg, decode, decode_stream, read_msg, read_msg_limited,
};
use thrum::control::server::after_spec_frame;

fuzz_target!(|data: &[u8]| {
    let _ = decode_stream::<ClientMsg>(data);
    let _ = decode_stream::<ServerMsg>(data);
    let _ = read_msg::<ServerMsg>(&mut &data[..]);
    let _ = read_msg_limited::<ClientMsg>(&mut &data[..], 64 << 10);
    let _ = decode::<ClientMsg>(data);
    let _ = decode::<ServerMsg>(data);
    if let Some((&flows, rest)) = data.split_first() {
        let limit = after_spec_frame(u32::from(flows) * 64 + 1);
        let _ = read_msg_limited::<ClientMsg>(&mut &rest[..], limit);
    }
});
