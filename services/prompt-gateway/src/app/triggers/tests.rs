use super::*;

const MINUTE: i64 = 60_000;

fn cron(text: &str, zone: &str) -> Schedule {
    Schedule {
        kind: Some(schedule::Kind::Cron(text.into())),
        time_zone: zone.into(),
    }
}

#[test]
fn cron_due_times_follow_the_time_zone() {
    // 2026-01-05 is a Monday; 09:00 in Paris is 08:00 UTC in winter.
    let now = chrono::Utc
        .with_ymd_and_hms(2026, 1, 4, 12, 0, 0)
        .unwrap()
        .timestamp_millis();
    let next = next_due(&cron("0 9 * * MON", "Europe/Paris"), now)
        .unwrap()
        .unwrap();
    let expected = chrono::Utc.with_ymd_and_hms(2026, 1, 5, 8, 0, 0).unwrap();
    assert_eq!(next, expected.timestamp_millis());
    assert!(next_due(&cron("0 9 * * MON", "Mars/Olympus"), now).is_err());
    assert!(next_due(&cron("not cron", ""), now).is_err());
    assert!(next_due(&cron("0 0 0 9 * * MON", ""), now).is_err());
    assert!(next_due(&cron("0 0 30 2 *", ""), now).is_err());
}

#[test]
fn intervals_keep_their_rhythm_and_skip_what_passed() {
    let every = When::Every(10 * MINUTE);
    assert_eq!(every.next(None, 0), Some(10 * MINUTE));
    // Fired on time: the next one is an interval later.
    assert_eq!(
        every.next(Some(10 * MINUTE), 10 * MINUTE),
        Some(20 * MINUTE)
    );
    // Fired 35 minutes late: the next is the first one after now, on the same rhythm.
    assert_eq!(
        every.next(Some(10 * MINUTE), 45 * MINUTE),
        Some(50 * MINUTE)
    );
    let once = When::Once(5 * MINUTE);
    assert_eq!(once.next(None, 0), Some(5 * MINUTE));
    assert_eq!(once.next(Some(5 * MINUTE), 5 * MINUTE), None);
    let at = |seconds: i64| Schedule {
        kind: Some(schedule::Kind::At(prost_types::Timestamp {
            seconds,
            nanos: 0,
        })),
        time_zone: String::new(),
    };
    assert!(next_due(&at(i64::MAX), 0).is_err());
    assert!(next_due(&at(-5), 0).is_err());
    assert!(next_due(&at(100), 200_000).is_err(), "in the past");
    assert_eq!(next_due(&at(100), 0).unwrap(), Some(100_000));
    let too_often = Schedule {
        kind: Some(schedule::Kind::EveryMs(1000)),
        time_zone: String::new(),
    };
    assert!(next_due(&too_often, 0).is_err());
}

#[test]
fn a_late_due_time_fires_unless_the_trigger_skips_missed_times() {
    let trigger = |catch_up: CatchUp| Trigger {
        schedule: Some(Schedule {
            kind: Some(schedule::Kind::EveryMs(10 * MINUTE as u64)),
            time_zone: String::new(),
        }),
        catch_up: catch_up as i32,
        ..Trigger::default()
    };
    let late = advance(&trigger(CatchUp::FireOnce), 10 * MINUTE, 95 * MINUTE);
    assert!(late.fire);
    assert_eq!(late.next, Some(100 * MINUTE));
    let skipped = advance(&trigger(CatchUp::Skip), 10 * MINUTE, 95 * MINUTE);
    assert!(!skipped.fire);
    assert_eq!(skipped.next, Some(100 * MINUTE));
    let on_time = advance(&trigger(CatchUp::Skip), 10 * MINUTE, 10 * MINUTE + 500);
    assert!(on_time.fire);
}
