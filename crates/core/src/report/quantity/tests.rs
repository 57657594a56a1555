use super::*;

#[test]
fn quantities_table() {
    // (text, milli-units or the error)
    let cases: &[(&str, Result<u128, QuantityError>)] = &[
        ("0", Ok(0)),
        ("1", Ok(1000)),
        ("100m", Ok(100)),
        ("0.5", Ok(500)),
        (".5", Ok(500)),
        ("1.", Ok(1000)),
        ("+2", Ok(2000)),
        ("1500m", Ok(1500)),
        ("0.1m", Ok(1)),
        ("1n", Ok(1)),
        ("250u", Ok(1)),
        ("1k", Ok(1_000_000)),
        ("1Ki", Ok(1_024_000)),
        ("128Mi", Ok(134_217_728_000)),
        ("1.5Gi", Ok(1_610_612_736_000)),
        ("1G", Ok(1_000_000_000_000)),
        ("1e3", Ok(1_000_000)),
        ("1E3", Ok(1_000_000)),
        ("5e-3", Ok(5)),
        ("1e-30", Ok(1)),
        ("1e-9999", Ok(1)),
        ("0.000", Ok(0)),
        ("-0", Ok(0)),
        ("", Err(QuantityError::Empty)),
        ("-1", Err(QuantityError::Negative)),
        ("abc", Err(QuantityError::Syntax)),
        ("1 Gi", Err(QuantityError::Syntax)),
        ("1.2.3", Err(QuantityError::Syntax)),
        (".", Err(QuantityError::Syntax)),
        ("1Xi", Err(QuantityError::Syntax)),
        ("1e", Err(QuantityError::Syntax)),
        ("1e99999", Err(QuantityError::Syntax)),
        ("m", Err(QuantityError::Syntax)),
        ("1e400", Err(QuantityError::TooLarge)),
        ("99999999999999999999Ei", Err(QuantityError::TooLarge)),
        ("9223372036854775807", Err(QuantityError::TooLarge)),
    ];
    for (text, want) in cases {
        assert_eq!(parse_milli(text), *want, "{text:?}");
    }
    let long = "1".repeat(MAX_QUANTITY_LEN + 1);
    assert_eq!(parse_milli(&long), Err(QuantityError::TooLong));
}

#[test]
fn canonical_forms() {
    let cpu = |t: &str| Cpu::parse(t).unwrap().to_string();
    assert_eq!(cpu("1500m"), "1500m");
    assert_eq!(cpu("2000m"), "2");
    assert_eq!(cpu("0.25"), "250m");
    assert_eq!(cpu("0"), "0");
    let memory = |t: &str| Memory::parse(t).unwrap().to_string();
    assert_eq!(memory("1536Mi"), "1536Mi");
    assert_eq!(memory("2048Mi"), "2Gi");
    assert_eq!(memory("1G"), "1000000000");
    assert_eq!(memory("1000Ki"), "1000Ki");
    assert_eq!(memory("500m"), "1");
    assert_eq!(memory("0"), "0");
    assert_eq!(Memory(3 << 30).times(2).to_string(), "6Gi");
    assert_eq!(Cpu(250).times(4).plus(Cpu(500)).to_string(), "1500m");
}
