#include "textflag.h"

// func PrefetchWrite(b []byte)
//
// One PREFETCHW per 64-byte line that b touches: from the line holding
// b's first byte (the address rounded down to its line) to the one
// holding its last. Stepping from the unrounded address would miss the
// last line whenever b's end lies less far into its line than its start.
TEXT ·PrefetchWrite(SB), NOSPLIT, $0-24
	MOVQ b_base+0(FP), AX
	MOVQ b_len+8(FP), CX
	TESTQ CX, CX
	JLE done
	LEAQ (AX)(CX*1), DX
	ANDQ $-64, AX
loop:
	BYTE $0x0F; BYTE $0x0D; BYTE $0x08 // PREFETCHW (AX)
	ADDQ $64, AX
	CMPQ AX, DX
	JB loop
done:
	RET
