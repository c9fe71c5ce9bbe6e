use std::time::Duration;

use super::{FairPool, Refusal, Shares};

fn pool(total: usize, per_user: usize) -> FairPool {
    FairPool::new(Shares::new(total, per_user))
}

/// Polls `future` once: whether it is ready now.
async fn ready_now<F: std::future::Future>(future: F) -> Option<F::Output> {
    tokio::time::timeout(Duration::from_millis(20), future)
        .await
        .ok()
}

#[test]
fn a_user_holds_at_most_their_share_and_the_pool_at_most_its_total() {
    let pool = pool(3, 2);
    let a1 = pool.try_acquire("a").unwrap();
    let _a2 = pool.try_acquire("a").unwrap();
    assert_eq!(pool.try_acquire("a").unwrap_err(), Refusal::UserShare(2));
    let _b1 = pool.try_acquire("b").unwrap();
    assert_eq!(pool.try_acquire("c").unwrap_err(), Refusal::Full(3));
    drop(a1);
    assert!(pool.try_acquire("c").is_ok());
    assert_eq!(pool.held(), 2, "c's slot was dropped at once");
}

#[test]
fn shares_are_at_least_one_and_never_above_the_total() {
    assert_eq!(
        Shares::new(0, 0),
        Shares {
            total: 1,
            per_user: 1
        }
    );
    assert_eq!(Shares::new(4, 9).per_user, 4);
    assert_eq!(Shares::quarter(32).per_user, 8);
    assert_eq!(Shares::quarter(3).per_user, 1);
}

#[tokio::test]
async fn a_freed_slot_goes_to_the_waiting_user_who_holds_the_fewest() {
    let pool = pool(4, 4);
    let mut a_slots: Vec<_> = (0..3).map(|_| pool.try_acquire("a").unwrap()).collect();
    let b = pool.try_acquire("b").unwrap();
    // a waits for a fourth slot first, then c (holding none) asks.
    let a_waits = tokio::spawn({
        let pool = pool.clone();
        async move { pool.acquire("a").await }
    });
    tokio::task::yield_now().await;
    tokio::time::sleep(Duration::from_millis(10)).await;
    let c_waits = tokio::spawn({
        let pool = pool.clone();
        async move { pool.acquire("c").await }
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    drop(a_slots.pop());
    let c_slot = c_waits.await.unwrap();
    assert_eq!(pool.held_by("c"), 1, "c held none, so it came first");
    assert!(!a_waits.is_finished());
    drop(b);
    let _a = a_waits.await.unwrap();
    assert_eq!(pool.held_by("a"), 3);
    drop(c_slot);
}

#[tokio::test]
async fn a_newcomer_does_not_overtake_a_waiting_user_who_holds_fewer() {
    let pool = pool(2, 2);
    let a1 = pool.try_acquire("a").unwrap();
    let _a2 = pool.try_acquire("a").unwrap();
    let b_waits = tokio::spawn({
        let pool = pool.clone();
        async move { pool.acquire("b").await }
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    drop(a1);
    let _b = b_waits.await.unwrap();
    // a asks again while the pool is full: it waits.
    assert!(ready_now(pool.acquire("a")).await.is_none());
}

#[tokio::test]
async fn a_dropped_wait_leaves_the_queue_and_gives_back_what_it_was_handed() {
    let pool = pool(1, 1);
    let a = pool.try_acquire("a").unwrap();
    // b's wait is dropped before a slot frees: nothing is left behind.
    assert!(ready_now(pool.acquire("b")).await.is_none());
    drop(a);
    assert_eq!(pool.held(), 0);
    // c is handed the slot, but its future is dropped before it looks.
    let a = pool.try_acquire("a").unwrap();
    let c_waits = tokio::spawn({
        let pool = pool.clone();
        async move { pool.acquire("c").await }
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    c_waits.abort();
    drop(a);
    let _ = c_waits.await;
    assert_eq!(
        pool.held(),
        0,
        "the slot handed to the dropped waiter came back"
    );
    assert!(pool.try_acquire("d").is_ok());
}

#[tokio::test]
async fn a_user_at_their_share_waits_for_their_own_slot_while_others_find_free_ones() {
    let pool = pool(8, 2);
    let a1 = pool.try_acquire("a").unwrap();
    let _a2 = pool.try_acquire("a").unwrap();
    let a_waits = tokio::spawn({
        let pool = pool.clone();
        async move { pool.acquire("a").await }
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(
        ready_now(pool.acquire("b")).await.is_some(),
        "b is not behind a"
    );
    assert!(!a_waits.is_finished());
    drop(a1);
    let _a3 = a_waits.await.unwrap();
    assert_eq!(pool.held_by("a"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_users_racing_never_hold_more_than_the_pool_nor_lose_a_slot() {
    let pool = pool(5, 2);
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let tasks: Vec<_> = (0..200)
        .map(|n| {
            let pool = pool.clone();
            let peak = std::sync::Arc::clone(&peak);
            tokio::spawn(async move {
                let user = format!("user-{}", n % 7);
                let acquired = tokio::time::timeout(
                    Duration::from_millis(if n % 5 == 0 { 1 } else { 10_000 }),
                    pool.acquire(&user),
                )
                .await;
                if let Ok(_slot) = acquired {
                    assert!(pool.held_by(&user) <= 2);
                    peak.fetch_max(pool.held(), std::sync::atomic::Ordering::Relaxed);
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    assert!(peak.load(std::sync::atomic::Ordering::Relaxed) <= 5);
    assert_eq!(pool.held(), 0, "every slot came back");
    assert!(pool.try_acquire("late").is_ok());
}
