//! Serve an aquaregia agent over ACP (Agent Client Protocol).
