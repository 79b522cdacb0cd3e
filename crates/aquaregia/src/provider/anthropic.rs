//! Placeholder: being written.

use std::collections::VecDeque;

use serde_json::Value;

use super::sse::SseEvent;
use super::{ModelRequest, ModelResponse, StreamDecoder, StreamEvent, WireApi};
use crate::error::Error;

pub(crate) struct Anthropic;

impl WireApi for Anthropic {
    const NAME: &'static str = "anthropic";
    const PATH: &'static str = "/v1/messages";
    type Decoder = Decoder;

    fn request_body(_request: &ModelRequest, _stream: bool) -> Result<Value, Error> {
        Err(Error::InvalidRequest("not yet implemented".into()))
    }

    fn parse_response(_body: &[u8]) -> Result<ModelResponse, Error> {
        Err(Error::InvalidRequest("not yet implemented".into()))
    }
}

#[derive(Default)]
pub(crate) struct Decoder;

impl StreamDecoder for Decoder {
    fn on_event(&mut self, _event: SseEvent, _out: &mut VecDeque<StreamEvent>) -> Result<bool, Error> {
        Ok(true)
    }

    fn finish(self, _complete: bool) -> Result<ModelResponse, Error> {
        Err(Error::InvalidRequest("not yet implemented".into()))
    }
}
