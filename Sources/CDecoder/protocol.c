// CDecoder is the wire between netactivityd and netactivity-decoder (include/decoder_protocol.h):
// a header both ends include. This file only gives the target a source of its own.
#include "decoder_protocol.h"
