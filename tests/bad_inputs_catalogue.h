#pragma once
// The catalogue of bad calls that tests/test_bad_inputs.cpp runs, grouped as the API is: each function
// makes its part's calls with BAD (bad_inputs.h), which checks each one and counts it in g_cases.

void views_and_creation();        // tests/bad_inputs_tensors.cpp
void autograd();                  // tests/bad_inputs_tensors.cpp
void modules();                   // tests/bad_inputs_modules.cpp
void optimizers_and_schedules();  // tests/bad_inputs_modules.cpp
void files();                     // tests/bad_inputs_modules.cpp
void new_surface();               // tests/bad_inputs_new_surface.cpp
