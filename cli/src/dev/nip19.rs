//! NIP-19 bech32 keys (`nsec`, `npub`), for what `buzz dev` prints: most Nostr clients take an
//! `nsec` where they do not take hex.

const CHARSET: &[u8; 32] = b"qpzry9x8gf2tvdw0s3jn54khce6mua7l";

/// The low five bits of `x` (every caller masks or shifts into that range first).
#[allow(clippy::cast_possible_truncation)]
fn five(x: u32) -> u8 {
    (x & 31) as u8
}

/// The BIP-173 checksum polynomial.
fn polymod(values: &[u8]) -> u32 {
    const GEN: [u32; 5] = [0x3b6a_57b2, 0x2650_8e6d, 0x1ea1_19fa, 0x3d42_33dd, 0x2a14_62b3];
    let mut chk: u32 = 1;
    for v in values {
        let top = chk >> 25;
        chk = ((chk & 0x01ff_ffff) << 5) ^ u32::from(*v);
        for (i, g) in GEN.iter().enumerate() {
            if (top >> i) & 1 == 1 {
                chk ^= g;
            }
        }
    }
    chk
}

/// Bech32 (not bech32m, as NIP-19 says) of `bytes` under the human-readable part `hrp`.
fn encode(hrp: &str, bytes: &[u8]) -> String {
    let mut data = Vec::with_capacity(bytes.len() * 8 / 5 + 1);
    let (mut acc, mut bits) = (0u32, 0u32);
    for b in bytes {
        acc = ((acc << 8) | u32::from(*b)) & 0x1fff;
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            data.push(five(acc >> bits));
        }
    }
    if bits > 0 {
        data.push(five(acc << (5 - bits)));
    }
    let mut values: Vec<u8> = hrp.bytes().map(|c| c >> 5).collect();
    values.push(0);
    values.extend(hrp.bytes().map(|c| c & 31));
    values.extend(&data);
    values.extend([0u8; 6]);
    let checksum = polymod(&values) ^ 1;
    let mut out = format!("{hrp}1");
    let tail = (0..6u32).map(|i| five(checksum >> (5 * (5 - i))));
    for d in data.iter().copied().chain(tail) {
        out.push(char::from(CHARSET[usize::from(d)]));
    }
    out
}

/// `nsec1...` of a secret key.
pub fn nsec(keys: &buzz_core::Keys) -> String {
    encode("nsec", &hex::decode(keys.secret_hex()).unwrap_or_default())
}

/// `npub1...` of a public key.
pub fn npub(keys: &buzz_core::Keys) -> String {
    encode("npub", &hex::decode(keys.public_hex()).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    // The examples of NIP-19 itself.
    const SECRET: &str = "67dea2ed018072d675f5415ecfaed7d2597555e202d85b3d65ea4e58d2d92ffa";

    #[test]
    fn nsec_matches_the_nip19_example() {
        let keys = buzz_core::Keys::from_secret_hex(SECRET).expect("valid key");
        assert_eq!(nsec(&keys), "nsec1vl029mgpspedva04g90vltkh6fvh240zqtv9k0t9af8935ke9laqsnlfe5");
    }

    #[test]
    fn npub_matches_the_nip19_example() {
        let pubkey =
            hex::decode("7e7e9c42a91bfef19fa929e5fda1b72e0ebc1a4c1141673e2794234d86addf4e").expect("hex");
        assert_eq!(
            encode("npub", &pubkey),
            "npub10elfcs4fr0l0r8af98jlmgdh9c8tcxjvz9qkw038js35mp4dma8qzvjptg"
        );
    }
}
