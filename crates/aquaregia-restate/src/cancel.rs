//! Cancellation of an invocation, noticed while one of its steps runs.
//!
//! restate-sdk 0.13 reads an invocation's input (where Restate's cancel signal arrives) only
//! while the handler awaits the journal; a `ctx.run` closure in flight (a tool call, a model
//! call) is never told, and a cancelled run would wait for its slowest call to end. So
//! [`DurableAgent::serve`](crate::DurableAgent::serve) reads each invocation's input ahead on
//! its own task, hands it on to the SDK unchanged, and watches it for the cancel signal: a
//! `SignalNotificationMessage` (type `0xFBFF`) for signal 1, the one Restate reserves for
//! cancellation. The steps race their work against that token.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use restate_sdk::endpoint::{Endpoint, HandleOptions, ProtocolMode, ResponseBody};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

tokio::task_local! {
    static CANCELLED: CancellationToken;
}

/// The token cancelled when the invocation being handled in this task is cancelled, if it is
/// served by [`serve`] (a `DurableAgent` bound into an endpoint of one's own has none: its
/// steps then end at the next journal access, as restate-sdk does it).
pub(crate) fn current() -> Option<CancellationToken> {
    CANCELLED.try_with(Clone::clone).ok()
}

/// Handles one request from Restate with its input watched for the cancel signal.
pub(crate) fn serve(
    endpoint: &Endpoint,
    request: hyper::Request<Incoming>,
) -> hyper::Response<Watched> {
    let token = CancellationToken::new();
    let (parts, body) = request.into_parts();
    let (sender, receiver) = mpsc::unbounded_channel();
    tokio::spawn(read_ahead(body, sender, token.clone()));
    let request = hyper::Request::from_parts(parts, Forwarded(receiver));
    endpoint
        .handle_with_options(
            request,
            HandleOptions {
                protocol_mode: ProtocolMode::BidiStream,
            },
        )
        .map(|body| Watched {
            inner: Box::pin(body),
            token,
        })
}

/// Reads the invocation's input as it comes, hands every byte on, and cancels `token` when
/// the cancel signal passes. Ends with the input, or when the SDK stops reading it.
async fn read_ahead(
    mut body: Incoming,
    sender: mpsc::UnboundedSender<Result<Bytes, hyper::Error>>,
    token: CancellationToken,
) {
    let mut signals = SignalWatch::default();
    loop {
        let frame = tokio::select! {
            frame = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)) => frame,
            () = sender.closed() => return,
        };
        match frame {
            Some(Ok(frame)) => {
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                if signals.cancelled_by(&data) && !token.is_cancelled() {
                    tracing::debug!("Restate cancelled the invocation");
                    token.cancel();
                }
                if sender.send(Ok(data)).is_err() {
                    return;
                }
            }
            Some(Err(error)) => {
                let _ = sender.send(Err(error));
                return;
            }
            None => return,
        }
    }
}

/// The input as the SDK reads it: what [`read_ahead`] handed on.
pub(crate) struct Forwarded(mpsc::UnboundedReceiver<Result<Bytes, hyper::Error>>);

impl Body for Forwarded {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        self.0
            .poll_recv(cx)
            .map(|next| next.map(|data| data.map(Frame::data)))
    }
}

/// The SDK's answer, whose polling runs the handler: polled with the invocation's token as
/// [`current`].
pub(crate) struct Watched {
    inner: Pin<Box<ResponseBody>>,
    token: CancellationToken,
}

impl Body for Watched {
    type Data = <ResponseBody as Body>::Data;
    type Error = <ResponseBody as Body>::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let token = self.token.clone();
        CANCELLED.sync_scope(token, || self.inner.as_mut().poll_frame(cx))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The message type of a signal notification in Restate's service protocol.
const SIGNAL_NOTIFICATION: u16 = 0xFBFF;
/// The signal Restate reserves for cancellation.
const CANCEL_SIGNAL: u64 = 1;
/// The field of a signal notification holding the signal's index (`uint32 idx = 2`).
const SIGNAL_INDEX_FIELD: u64 = 2;
/// The bytes of a message header: type (16 bits), flags (16), length (32), big-endian.
const HEADER_LEN: usize = 8;

/// Reads the protocol's framing (each message a header and a protobuf body) across the
/// input's chunks, keeping only signal notifications and skipping the rest unbuffered.
#[derive(Default)]
struct SignalWatch {
    buffer: BytesMut,
    /// Bytes of a message of no interest still to skip.
    skip: usize,
}

impl SignalWatch {
    /// Whether the cancel signal is in `data` (or completed by it).
    fn cancelled_by(&mut self, mut data: &[u8]) -> bool {
        let mut cancelled = false;
        loop {
            if self.skip > 0 {
                let skipped = self.skip.min(data.len());
                self.skip -= skipped;
                data = &data[skipped..];
            }
            if data.is_empty() {
                return cancelled;
            }
            // Enough for a header, then for a signal's body.
            let wanted = if self.buffer.len() < HEADER_LEN {
                HEADER_LEN
            } else {
                HEADER_LEN + message_len(&self.buffer)
            };
            let taken = (wanted - self.buffer.len()).min(data.len());
            self.buffer.extend_from_slice(&data[..taken]);
            data = &data[taken..];
            if self.buffer.len() < wanted {
                return cancelled;
            }
            if self.buffer.len() == HEADER_LEN {
                let kind = u16::from_be_bytes([self.buffer[0], self.buffer[1]]);
                if kind != SIGNAL_NOTIFICATION {
                    self.skip = message_len(&self.buffer);
                    self.buffer.clear();
                }
                // A signal with an empty body (no index) is not the cancel signal; it is
                // complete already.
                else if message_len(&self.buffer) == 0 {
                    self.buffer.clear();
                }
                continue;
            }
            let mut message = self.buffer.split().freeze();
            message.advance(HEADER_LEN);
            cancelled |= signal_index(&message) == Some(CANCEL_SIGNAL);
        }
    }
}

/// The body length a header announces.
fn message_len(header: &[u8]) -> usize {
    let length = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
    usize::try_from(length).unwrap_or(usize::MAX)
}

/// The `idx` of a signal notification's protobuf body, if it has one.
fn signal_index(mut body: &[u8]) -> Option<u64> {
    while !body.is_empty() {
        let key = varint(&mut body)?;
        let (field, wire_type) = (key >> 3, key & 7);
        match wire_type {
            0 => {
                let value = varint(&mut body)?;
                if field == SIGNAL_INDEX_FIELD {
                    return Some(value);
                }
            }
            1 => body = body.get(8..)?,
            2 => {
                let length = usize::try_from(varint(&mut body)?).ok()?;
                body = body.get(length..)?;
            }
            5 => body = body.get(4..)?,
            _ => return None,
        }
    }
    None
}

/// Reads a protobuf varint off the front of `bytes`.
fn varint(bytes: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = bytes.split_first()?;
        *bytes = rest;
        value |= u64::from(byte & 0x7F) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A message as Restate frames it.
    fn message(kind: u16, body: &[u8]) -> Vec<u8> {
        let mut bytes = kind.to_be_bytes().to_vec();
        bytes.extend_from_slice(&[0, 0]);
        bytes.extend_from_slice(&u32::try_from(body.len()).unwrap().to_be_bytes());
        bytes.extend_from_slice(body);
        bytes
    }

    /// A signal notification for signal `idx` with a `void` result (field 4, empty).
    fn signal(idx: u8) -> Vec<u8> {
        message(SIGNAL_NOTIFICATION, &[0x10, idx, 0x22, 0x00])
    }

    #[test]
    fn the_cancel_signal_is_found_whatever_the_chunking() {
        // A start message with a large body, an awakeable's signal (17), then signal 1.
        let mut input = message(0x0000, &vec![0xAB; 300]);
        input.extend(signal(17));
        input.extend(message(0x8001, &[0x0A, 0x03, 1, 2, 3]));
        input.extend(signal(1));
        for chunk in [1, 2, 3, 7, 8, 9, 64, input.len()] {
            let mut watch = SignalWatch::default();
            let found = input
                .chunks(chunk)
                .map(|piece| watch.cancelled_by(piece))
                .collect::<Vec<_>>();
            assert_eq!(
                found.iter().filter(|found| **found).count(),
                1,
                "chunks of {chunk}"
            );
            assert!(found.last().copied().unwrap(), "chunks of {chunk}");
        }
    }

    #[test]
    fn other_signals_and_messages_are_not_cancellation() {
        let mut input = signal(17);
        input.extend(signal(2));
        // A named signal (field 3) and an empty one.
        input.extend(message(
            SIGNAL_NOTIFICATION,
            &[0x1A, 0x01, b'x', 0x22, 0x00],
        ));
        input.extend(message(SIGNAL_NOTIFICATION, &[]));
        // Type 0xFBFF's bytes inside another message's body.
        input.extend(message(0x0400, &[0xFB, 0xFF, 0, 0, 0, 0, 0, 2, 0x10, 1]));
        let mut watch = SignalWatch::default();
        assert!(!watch.cancelled_by(&input));
        assert!(
            watch.cancelled_by(&signal(1)),
            "still in step after all that"
        );
    }
}
