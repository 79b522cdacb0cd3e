//! [`lock`]: taking a [`Mutex`] whatever a panic left it in, the one way the aquaregia crates
//! lock their mutexes.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, ignoring poisoning.
///
/// A mutex is poisoned when a thread panicked while holding it. The aquaregia crates keep
/// every critical section to a single update of plain data, so the data is consistent even
/// then: the lock is taken over rather than turning one panic into a panic of every later
/// caller.
///
/// ```
/// use std::sync::Mutex;
/// let counter = Mutex::new(1);
/// *aquaregia::sync::lock(&counter) += 1;
/// assert_eq!(*aquaregia::sync::lock(&counter), 2);
/// ```
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
