// Closes what isa/begin_avx2.h or isa/begin_avx512.h opened.
#undef cpu
#undef friend
#undef __AVX__
#undef __AVX2__
#undef __FMA__
#undef __F16C__
#undef __BMI__
#undef __BMI2__
#undef __AVX512F__
#undef __AVX512CD__
#undef __AVX512BW__
#undef __AVX512DQ__
#undef __AVX512VL__
#pragma GCC pop_options
