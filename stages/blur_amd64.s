#include "textflag.h"

// AVX2 sweeps of the blur passes (see blur_vec.go). Each handles n elements,
// n a positive multiple of 8: eight uint32 sums per instruction.

// func mulLineU8(acc *uint32, c *uint8, n int, w uint32)
TEXT ·mulLineU8(SB), NOSPLIT, $0-28
	MOVQ acc+0(FP), DI
	MOVQ c+8(FP), SI
	MOVQ n+16(FP), CX
	MOVL w+24(FP), AX
	VMOVD AX, X0
	VPBROADCASTD X0, Y0
mulU8:
	VPMOVZXBD (SI), Y1
	VPMULLD Y0, Y1, Y1
	VMOVDQU Y1, (DI)
	ADDQ $8, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JNZ mulU8
	VZEROUPPER
	RET

// func mulLineU16(acc *uint32, c *uint16, n int, w uint32)
TEXT ·mulLineU16(SB), NOSPLIT, $0-28
	MOVQ acc+0(FP), DI
	MOVQ c+8(FP), SI
	MOVQ n+16(FP), CX
	MOVL w+24(FP), AX
	VMOVD AX, X0
	VPBROADCASTD X0, Y0
mulU16:
	VPMOVZXWD (SI), Y1
	VPMULLD Y0, Y1, Y1
	VMOVDQU Y1, (DI)
	ADDQ $16, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JNZ mulU16
	VZEROUPPER
	RET

// func addPairU8(acc *uint32, a, b *uint8, n int, w uint32)
TEXT ·addPairU8(SB), NOSPLIT, $0-36
	MOVQ acc+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	MOVL w+32(FP), AX
	VMOVD AX, X0
	VPBROADCASTD X0, Y0
addU8:
	VPMOVZXBD (SI), Y1
	VPMOVZXBD (DX), Y2
	VPADDD Y2, Y1, Y1
	VPMULLD Y0, Y1, Y1
	VPADDD (DI), Y1, Y1
	VMOVDQU Y1, (DI)
	ADDQ $8, SI
	ADDQ $8, DX
	ADDQ $32, DI
	SUBQ $8, CX
	JNZ addU8
	VZEROUPPER
	RET

// func addPairU16(acc *uint32, a, b *uint16, n int, w uint32)
TEXT ·addPairU16(SB), NOSPLIT, $0-36
	MOVQ acc+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	MOVL w+32(FP), AX
	VMOVD AX, X0
	VPBROADCASTD X0, Y0
addU16:
	VPMOVZXWD (SI), Y1
	VPMOVZXWD (DX), Y2
	VPADDD Y2, Y1, Y1
	VPMULLD Y0, Y1, Y1
	VPADDD (DI), Y1, Y1
	VMOVDQU Y1, (DI)
	ADDQ $16, SI
	ADDQ $16, DX
	ADDQ $32, DI
	SUBQ $8, CX
	JNZ addU16
	VZEROUPPER
	RET
