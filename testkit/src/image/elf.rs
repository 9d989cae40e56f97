//! An image this machine cannot run: its config says another architecture, and its entrypoint is
//! a real static ELF program of that architecture (it only exits 0), written here byte by byte
//! (64-byte header, one loadable segment, a few instructions), so no cross compiler is needed.
//! Run on this machine, the kernel refuses its machine type and runc logs `exec /app: exec format
//! error`, exactly as for a binary built for the other CPU.

use super::{ImageBuilder, machine_architecture};

/// Where the program goes in the image.
const PATH: &str = "/app";
/// Where the program is loaded.
const BASE: u64 = 0x40_0000;
/// ELF header and program header sizes.
const HEADER: u16 = 64;
const PROGRAM_HEADER: u16 = 56;

/// The architecture whose programs this machine cannot run: arm64 on amd64, amd64 elsewhere.
pub fn foreign_architecture() -> &'static str {
    if machine_architecture() == "amd64" {
        "arm64"
    } else {
        "amd64"
    }
}

/// An image for [`foreign_architecture`] whose entrypoint is a program of it.
pub fn foreign_image() -> ImageBuilder {
    ImageBuilder::new()
        .architecture(foreign_architecture())
        .file(PATH, program(foreign_architecture()), 0o755)
        .entrypoint(&[PATH])
}

/// A static ELF64 little-endian executable for `architecture` that calls `exit(0)`.
fn program(architecture: &str) -> Vec<u8> {
    let (machine, code): (u16, Vec<u8>) = match architecture {
        // mov x0, #0; mov x8, #93 (exit); svc #0
        "arm64" => (
            183,
            [0xd280_0000u32, 0xd280_0ba8, 0xd400_0001]
                .iter()
                .flat_map(|word| word.to_le_bytes())
                .collect(),
        ),
        // mov eax, 60 (exit); xor edi, edi; syscall
        _ => (62, vec![0xb8, 0x3c, 0, 0, 0, 0x31, 0xff, 0x0f, 0x05]),
    };
    let code_at = u64::from(HEADER + PROGRAM_HEADER);
    let size = code_at + code.len() as u64;
    let mut elf = Vec::with_capacity(size as usize);
    elf.extend_from_slice(&[0x7f, b'E', b'L', b'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    elf.extend_from_slice(&2u16.to_le_bytes()); // ET_EXEC
    elf.extend_from_slice(&machine.to_le_bytes());
    elf.extend_from_slice(&1u32.to_le_bytes()); // EV_CURRENT
    elf.extend_from_slice(&(BASE + code_at).to_le_bytes()); // entry
    elf.extend_from_slice(&u64::from(HEADER).to_le_bytes()); // program headers' offset
    elf.extend_from_slice(&0u64.to_le_bytes()); // no section headers
    elf.extend_from_slice(&0u32.to_le_bytes()); // flags
    for half in [HEADER, PROGRAM_HEADER, 1, 0, 0, 0] {
        elf.extend_from_slice(&half.to_le_bytes());
    }
    elf.extend_from_slice(&1u32.to_le_bytes()); // PT_LOAD
    elf.extend_from_slice(&5u32.to_le_bytes()); // read and execute
    for quad in [0, BASE, BASE, size, size, 0x1000] {
        elf.extend_from_slice(&quad.to_le_bytes());
    }
    elf.extend_from_slice(&code);
    elf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_is_an_elf_executable_of_the_other_architecture_only() {
        let elf = program(foreign_architecture());
        assert_eq!(&elf[..4], b"\x7fELF");
        let machine = u16::from_le_bytes([elf[18], elf[19]]);
        let this = if machine_architecture() == "amd64" {
            62
        } else {
            183
        };
        assert_ne!(machine, this, "a program this machine would run");
        let entry = u64::from_le_bytes(elf[24..32].try_into().unwrap());
        assert_eq!(entry, BASE + 120, "the code right after the headers");
        assert_eq!(elf.len(), 120 + if machine == 183 { 12 } else { 9 });
    }
}
