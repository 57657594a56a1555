use super::*;

#[test]
fn a_manual_clock_moves_only_when_advanced_and_its_clones_share_it() {
    let clock = Clock::manual();
    let clone = clock.clone();
    let start = clock.now();
    assert_eq!(clock.now(), start);
    clone.advance(Duration::from_secs(5));
    assert_eq!(clock.now(), start + Duration::from_secs(5));
    assert_eq!(
        clock.expiry(Duration::from_secs(1)),
        start + Duration::from_secs(6)
    );
}

#[test]
fn a_manual_clock_moves_its_wall_reading_with_it_and_steps_it_alone() {
    let epoch = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let clock = Clock::manual_at(epoch);
    let start = clock.now();
    assert_eq!(clock.wall(), epoch);
    clock.clone().advance(Duration::from_secs(7));
    assert_eq!(clock.wall(), epoch + Duration::from_secs(7));
    clock.set_wall(epoch);
    assert_eq!(clock.wall(), epoch, "the wall reading went back");
    assert_eq!(
        clock.now(),
        start + Duration::from_secs(7),
        "not the monotonic one"
    );
    clock.advance(Duration::MAX);
    assert!(clock.wall() > epoch + Duration::from_secs(3600));
}

#[test]
fn an_absurd_lifetime_does_not_overflow() {
    let clock = Clock::manual();
    assert!(clock.expiry(Duration::MAX) > clock.now());
    let before = clock.now();
    clock.advance(Duration::MAX);
    assert!(clock.now() > before, "time never goes back");
}

#[test]
fn the_system_clock_is_not_moved() {
    let clock = Clock::system();
    let before = clock.now();
    clock.advance(Duration::from_secs(3600));
    clock.set_wall(SystemTime::UNIX_EPOCH);
    assert!(clock.now() < before + Duration::from_secs(3600));
    assert!(
        clock.wall() > SystemTime::UNIX_EPOCH + Duration::from_secs(86_400),
        "the system's wall clock is not stepped"
    );
}
