#include "textflag.h"

// func PrefetchWrite(b []byte)
TEXT ·PrefetchWrite(SB), NOSPLIT, $0-24
	MOVQ b_base+0(FP), AX
	MOVQ b_len+8(FP), CX
	TESTQ CX, CX
	JLE done
	LEAQ (AX)(CX*1), DX
loop:
	BYTE $0x0F; BYTE $0x0D; BYTE $0x08 // PREFETCHW (AX)
	ADDQ $64, AX
	CMPQ AX, DX
	JB loop
done:
	RET
