// KL_CHOICE_TABLE_MAX_BYTES and KL_CHOICE_TABLE_MAX_ROWS lowered: a table
// over the cap is refused before it is read (a file by its size), one at
// the cap is read (klaunch/choose.h). Its own binary: the caps are macros
// of the implementation.
#define KL_CHOICE_TABLE_MAX_BYTES 4096u
#define KL_CHOICE_TABLE_MAX_ROWS 3u
#define KLAUNCH_IMPLEMENTATION
#include "klaunch/paged_decode.h"
#include "klaunch/record_backend.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace {

std::string table(int rows, size_t pad_to) {
    std::string s = "klaunch-choices 1\ndevice h100 cc 9.0 sms 132 l2 52428800 mem_gib 79\n";
    for (int i = 0; i < rows; i++)
        s += "row h100 paged_decode_gqa_bf16 graph num_seqs=" + std::to_string(i + 1) +
             " max_seq_len=4096 num_q_heads=64 num_kv_heads=8 block_size=16 alt=mma_seed us=1\n";
    // A comment line of the bytes left (at least "#\n"), then "end\n".
    while (pad_to > s.size() + 4 + 1) {
        const size_t left = pad_to - s.size() - 4, line = left > 1000 + 2 ? 1000 : left;
        s += "#" + std::string(line - 2, '.') + "\n";
    }
    return s + "end\n";
}

TEST(ChoiceTableCap, RefusesATableOverTheByteCap) {
    kl_choice_table t;
    const std::string at = table(1, 4096), over = table(1, 4097);
    ASSERT_EQ(at.size(), 4096u);
    ASSERT_EQ(over.size(), 4097u);
    EXPECT_EQ(kl_choice_table_load_text(at.data(), at.size(), "at.choices", kl_paged_decode_operations, &t), KL_SUCCESS)
        << kl_last_error_message();
    kl_choice_table_free(&t);
    EXPECT_EQ(kl_choice_table_load_text(over.data(), over.size(), "over.choices", kl_paged_decode_operations, &t),
              KL_ERROR_CHOICE_TABLE);
    EXPECT_STREQ(kl_last_error_message(),
                 "KL_ERROR_CHOICE_TABLE: over.choices: 4097 bytes; at most 4096 are read (KL_CHOICE_TABLE_MAX_BYTES)");
    const std::string path = testing::TempDir() + "/over.choices";
    FILE *f = fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fwrite(over.data(), 1, over.size(), f);
    fclose(f);
    EXPECT_EQ(kl_choice_table_load_file(path.c_str(), kl_paged_decode_operations, &t), KL_ERROR_CHOICE_TABLE);
    EXPECT_NE(std::string(kl_last_error_message()).find("4097 bytes; at most 4096 are read"), std::string::npos);
}

TEST(ChoiceTableCap, RefusesMoreRowsThanTheCap) {
    kl_choice_table t;
    const std::string three = table(3, 0), four = table(4, 0);
    EXPECT_EQ(kl_choice_table_load_text(three.data(), three.size(), "t", kl_paged_decode_operations, &t), KL_SUCCESS);
    kl_choice_table_free(&t);
    EXPECT_EQ(kl_choice_table_load_text(four.data(), four.size(), "t", kl_paged_decode_operations, &t), KL_ERROR_CHOICE_TABLE);
    EXPECT_STREQ(kl_last_error_message(), "KL_ERROR_CHOICE_TABLE: t:6: more than 3 rows (KL_CHOICE_TABLE_MAX_ROWS)");
}

}  // namespace
