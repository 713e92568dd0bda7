#include "textflag.h"

// grayConst: nine VPSHUFB masks that gather the R, G and B bytes of 16
// interleaved pixels from the three 16-byte loads that hold them (R from
// loads 0, 1, 2 at offsets 0, 16, 32, then G at 48.., B at 96..; 0x80 gives
// 0), then the PMADDWD weights: (9798, 19235) for the (R, G) word pairs at
// 144, (3735, 16384) for the (B, 1) pairs at 160, and the words of 1 at 176.
DATA grayConst<>+0(SB)/8, $0x80800f0c09060300
DATA grayConst<>+8(SB)/8, $0x8080808080808080
DATA grayConst<>+16(SB)/8, $0x0502808080808080
DATA grayConst<>+24(SB)/8, $0x80808080800e0b08
DATA grayConst<>+32(SB)/8, $0x8080808080808080
DATA grayConst<>+40(SB)/8, $0x0d0a070401808080
DATA grayConst<>+48(SB)/8, $0x8080800d0a070401
DATA grayConst<>+56(SB)/8, $0x8080808080808080
DATA grayConst<>+64(SB)/8, $0x0603008080808080
DATA grayConst<>+72(SB)/8, $0x80808080800f0c09
DATA grayConst<>+80(SB)/8, $0x8080808080808080
DATA grayConst<>+88(SB)/8, $0x0e0b080502808080
DATA grayConst<>+96(SB)/8, $0x8080800e0b080502
DATA grayConst<>+104(SB)/8, $0x8080808080808080
DATA grayConst<>+112(SB)/8, $0x0704018080808080
DATA grayConst<>+120(SB)/8, $0x8080808080800d0a
DATA grayConst<>+128(SB)/8, $0x8080808080808080
DATA grayConst<>+136(SB)/8, $0x0f0c090603008080
DATA grayConst<>+144(SB)/8, $0x4b2326464b232646
DATA grayConst<>+152(SB)/8, $0x4b2326464b232646
DATA grayConst<>+160(SB)/8, $0x40000e9740000e97
DATA grayConst<>+168(SB)/8, $0x40000e9740000e97
DATA grayConst<>+176(SB)/8, $0x0001000100010001
DATA grayConst<>+184(SB)/8, $0x0001000100010001
GLOBL grayConst<>(SB), RODATA|NOPTR, $192

// func grayRGB(dst, src *uint8, n int)
// Y = (9798·R + 19235·G + 3735·B + 16384) >> 15 for n pixels, n a positive
// multiple of 16: the R·9798+G·19235 and B·3735+1·16384 halves come from
// PMADDWD on word pairs, exact in 32 bits.
TEXT ·grayRGB(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VPXOR X15, X15, X15
	VMOVDQU grayConst<>+144(SB), X14
	VMOVDQU grayConst<>+160(SB), X13
	VMOVDQU grayConst<>+176(SB), X12
gray:
	VMOVDQU 0(SI), X0
	VMOVDQU 16(SI), X1
	VMOVDQU 32(SI), X2
	VPSHUFB grayConst<>+0(SB), X0, X3
	VPSHUFB grayConst<>+16(SB), X1, X4
	VPOR X4, X3, X3
	VPSHUFB grayConst<>+32(SB), X2, X4
	VPOR X4, X3, X3 // R
	VPSHUFB grayConst<>+48(SB), X0, X5
	VPSHUFB grayConst<>+64(SB), X1, X4
	VPOR X4, X5, X5
	VPSHUFB grayConst<>+80(SB), X2, X4
	VPOR X4, X5, X5 // G
	VPSHUFB grayConst<>+96(SB), X0, X6
	VPSHUFB grayConst<>+112(SB), X1, X4
	VPOR X4, X6, X6
	VPSHUFB grayConst<>+128(SB), X2, X4
	VPOR X4, X6, X6 // B

	VPUNPCKLBW X15, X3, X7 // R 0..7 as words
	VPUNPCKHBW X15, X3, X3 // R 8..15
	VPUNPCKLBW X15, X5, X8 // G 0..7
	VPUNPCKHBW X15, X5, X5 // G 8..15
	VPUNPCKLBW X15, X6, X9 // B 0..7
	VPUNPCKHBW X15, X6, X6 // B 8..15

	VPUNPCKLWD X8, X7, X10 // (R, G) 0..3
	VPMADDWD X14, X10, X10
	VPUNPCKLWD X12, X9, X11 // (B, 1) 0..3
	VPMADDWD X13, X11, X11
	VPADDD X11, X10, X10
	VPSRLD $15, X10, X10 // Y 0..3
	VPUNPCKHWD X8, X7, X7
	VPMADDWD X14, X7, X7
	VPUNPCKHWD X12, X9, X9
	VPMADDWD X13, X9, X9
	VPADDD X9, X7, X7
	VPSRLD $15, X7, X7 // Y 4..7
	VPACKSSDW X7, X10, X10 // Y 0..7 as words

	VPUNPCKLWD X5, X3, X7
	VPMADDWD X14, X7, X7
	VPUNPCKLWD X12, X6, X9
	VPMADDWD X13, X9, X9
	VPADDD X9, X7, X7
	VPSRLD $15, X7, X7 // Y 8..11
	VPUNPCKHWD X5, X3, X3
	VPMADDWD X14, X3, X3
	VPUNPCKHWD X12, X6, X6
	VPMADDWD X13, X6, X6
	VPADDD X6, X3, X3
	VPSRLD $15, X3, X3 // Y 12..15
	VPACKSSDW X3, X7, X7 // Y 8..15 as words

	VPACKUSWB X7, X10, X10
	VMOVDQU X10, (DI)
	ADDQ $48, SI
	ADDQ $16, DI
	SUBQ $16, CX
	JNZ gray
	RET
